package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/probe"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// Helpers that several commands share: the review commands' --state, the
// sessions' modes that history and history report read, and the probe the
// console runs.

// registerState adds --state to a review command's flags.
func registerState(fs *flag.FlagSet) *string {
	return fs.String("state", "", "the fleet's shared state: redis://HOST:PORT/DB or rediss:// (also LIMITSCOPE_REDIS_URL; password from the URL or REDISCLI_AUTH)")
}

// reviewState is the shared state's URL, from --state (flagVal) or else
// LIMITSCOPE_REDIS_URL, and which of them named it; "" when neither does.
// Its errors never quote the URL.
func reviewState(a *app, flagVal string) (url, source string, err error) {
	url, source = flagVal, "--state"
	if url == "" {
		url, source = a.getenv("LIMITSCOPE_REDIS_URL"), "LIMITSCOPE_REDIS_URL"
	}
	if url == "" {
		return "", "", nil
	}
	if _, err := fleet.ParseURL(url, a.getenv); err != nil {
		return "", "", fmt.Errorf("%s: shared state URL: %w", source, err)
	}
	return url, source, nil
}

// sessionModes maps each session id to its mode (real or simulated).
func sessionModes(ctx context.Context, rd *store.Reader) (map[uint32]string, error) {
	list, err := rd.Sessions(ctx, 0)
	if err != nil {
		return nil, err
	}
	modes := make(map[uint32]string, len(list))
	for _, s := range list {
		modes[s.ID] = s.Mode
	}
	return modes, nil
}

// modeOf is a session's mode; a pruned session's calls count as real.
func modeOf(modes map[uint32]string, session uint32) string {
	if m := modes[session]; m != "" {
		return m
	}
	return store.ModeReal
}

// consoleProbe is the console's p key (tui.Options.Probe and ProbePlan):
// a probe with the default budget on the command's calls, its card stored.
func consoleProbe(a *app, cs *calls.Calls) (func(context.Context, stream.Target) ([]string, error), func(stream.Target) string) {
	opts := func(t stream.Target) probe.Options {
		return probe.Options{Target: t, Do: cs.Doer.Do, Now: a.now, Simulated: cs.Providers.Simulated, Scenario: cs.Providers.Scenario}
	}
	run := func(ctx context.Context, t stream.Target) ([]string, error) {
		card, err := probe.Run(ctx, opts(t))
		if err != nil {
			return nil, err
		}
		lines := card.Lines()
		if err := saveCard(cs.History.Path(), card); err != nil {
			lines = append(lines, "(not stored in the history: "+err.Error()+")")
		} else if card.QuotaStopped() {
			lines = append(lines, "(not stored in the history: "+errStoppedCard.Error()+")")
		}
		return lines, nil
	}
	plan := func(t stream.Target) string {
		reqs, toks := probe.Plan(opts(t))
		return fmt.Sprintf("up to %d requests, about %d tokens", reqs, toks)
	}
	return run, plan
}
