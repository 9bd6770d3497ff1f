package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// maxPromptBytes bounds a prompt read from stdin.
const maxPromptBytes = 8 << 20

// sendOpts are send's flags: the shared call flags, the targets, --json.
type sendOpts struct {
	calls   calls.Flags
	targets calls.TargetFlags
	json    bool
}

// newSendOpts registers send's flags on fs.
func newSendOpts(fs *flag.FlagSet) *sendOpts {
	o := &sendOpts{}
	o.targets.Register(fs)
	o.calls.Register(fs)
	fs.BoolVar(&o.json, "json", false, "print one JSON document on stdout instead of streaming the answer")
	return o
}

const sendHelp = `Usage: limitscope send --model provider/model [--fallback provider/model]... [flags] PROMPT

PROMPT - reads the prompt from stdin.

Flags:
`

func runSend(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	o := newSendOpts(fs)
	if ok, code := parseFlags(a, fs, "limitscope send", args, flagHelp(fs, sendHelp)); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope send: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		return fail(errors.New("want exactly one PROMPT argument (- reads stdin); see limitscope send --help"))
	}
	if err := o.targets.Validate(); err != nil {
		return fail(err)
	}
	if err := o.calls.Validate(); err != nil {
		return fail(err)
	}
	chain, err := o.targets.Chain()
	if err != nil {
		return fail(err)
	}
	prompt := fs.Arg(0)
	if prompt == "-" {
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxPromptBytes+1))
		if err != nil {
			return fail(fmt.Errorf("reading the prompt from stdin: %w", err))
		}
		if len(b) > maxPromptBytes {
			return fail(fmt.Errorf("the prompt on stdin is over %d MiB", maxPromptBytes>>20))
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return fail(errors.New("the prompt is empty"))
	}

	simulated := calls.SimRequested(a.getenv, o.calls.Sim.Sim)
	if !simulated {
		// Check the keys before starting anything: a real provider is never
		// silently replaced by the simulator.
		for _, t := range chain {
			if t.Account != "" {
				continue // a named account's key is checked by Providers.Check
			}
			if _, err := stream.Resolve(t.Provider, a.getenv); err != nil {
				return fail(err)
			}
		}
	}
	cs, err := calls.Open(ctx, a.env(), o.calls, simulated, "send")
	if err != nil {
		return fail(err)
	}
	defer cs.Close(ctx, calls.DefaultCloseAllowance)
	if err := cs.Providers.Check(chain); err != nil {
		return fail(err)
	}

	call := retry.Call{Chain: chain, Prompt: prompt, MaxTokens: o.targets.MaxTokens, Policy: o.calls.Policy}
	out := &sendPrinter{a: a, json: o.json, stream: a.stdoutTTY}
	res := cs.Run(ctx, call, out.event)
	if o.json {
		doc := newSendDoc(res, cs.Providers.Simulated)
		b, err := json.MarshalIndent(doc, "", "  ")
		if err == nil {
			// C1 controls and bidi overrides in a hostile server's text
			// are escaped too: the document may be read on a terminal.
			_, err = a.stdout.Write(append(sanitize.JSON(b), '\n'))
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "limitscope send: writing JSON: %v\n", err)
		}
	} else {
		out.finish(res, cs.Providers)
	}
	return res.Outcome.ExitCode()
}

// abandonedMark ends, on a terminal, the partial answer of a stream that
// broke or was cancelled: the text above it is not the answer.
const abandonedMark = " ⟂ [abandoned]"

// sendPrinter prints an answer to stdout and notices to stderr. On a
// terminal the answer streams, and a partial answer that is abandoned (a
// broken stream retried, a cancel) is marked with abandonedMark; to a pipe
// or a file, stdout gets the served answer once, whole, or nothing.
type sendPrinter struct {
	a       *app
	json    bool
	stream  bool // stdout is a terminal: stream the text as it comes
	printed bool // text of the current attempt was printed
	text    sanitize.Filter

	chain   []stream.Target // the call's chain, from its start
	started time.Time       // the call's start
}

func (p *sendPrinter) event(ev retry.Event) {
	if p.json {
		return
	}
	switch ev.Kind {
	case retry.EventCallStart:
		p.chain, p.started = ev.Chain, ev.Time
	case retry.EventText:
		if !p.stream {
			return // printed whole at the end, only when it is the answer
		}
		// The answer is untrusted: no escape sequence reaches the terminal.
		io.WriteString(p.a.stdout, p.text.Text(ev.Text))
		p.printed = true
	case retry.EventAttemptEnd:
		at := ev.Attempt
		if at == nil {
			return
		}
		if p.stream {
			io.WriteString(p.a.stdout, p.text.Flush())
		}
		if at.Class == stream.ClassOK {
			return
		}
		if p.printed {
			// The partial answer is abandoned: mark it and end its line;
			// a retry's answer starts on a new line.
			fmt.Fprintln(p.a.stdout, abandonedMark)
			p.printed = false
		}
		if at.PartialText != "" || at.MidStream {
			if at.Class == stream.ClassCancelled {
				fmt.Fprintf(p.a.stderr, "limitscope: the call to %s was cancelled after %d characters\n",
					sanitize.Text(at.Target.String()), len(at.PartialText))
			} else {
				fmt.Fprintf(p.a.stderr, "limitscope: the stream from %s broke after %d characters (%s); %s\n",
					sanitize.Text(at.Target.String()), len(at.PartialText), sanitize.Text(describeError(at.Class, at.Status, at.Code)), at.Decision)
			}
		}
		if at.Decision == retry.DecideFailover {
			fmt.Fprintf(p.a.stderr, "limitscope: failing over from %s%s at %s: it answered %s\n",
				sanitize.Text(at.Target.String()), p.next(at.Target), roundDur(ev.Time.Sub(p.started)),
				sanitize.Text(describeError(at.Class, at.Status, at.Code)))
		}
	case retry.EventWait:
		w := ev.Wait
		fmt.Fprintf(p.a.stderr, "limitscope: waiting %s before %s: %s\n", roundDur(w.Duration), sanitize.Text(w.Target.String()), sanitize.Text(w.Reason))
	}
}

// next is " to B" for the target after t in the call's chain, or "".
func (p *sendPrinter) next(t stream.Target) string {
	for i, c := range p.chain {
		if c == t && i+1 < len(p.chain) {
			return " to " + p.chain[i+1].String()
		}
	}
	return ""
}

func (p *sendPrinter) finish(res retry.Result, provs *calls.Providers) {
	switch {
	case p.printed && res.Outcome != retry.OutcomeOK:
		fmt.Fprintln(p.a.stdout, abandonedMark)
	case p.printed:
		fmt.Fprintln(p.a.stdout)
	case !p.stream && res.Outcome == retry.OutcomeOK:
		// One complete answer, written once.
		io.WriteString(p.a.stdout, sanitize.Text(res.Text)+"\n")
	}
	for _, m := range res.Moves {
		if m.Attempt == 0 && m.Reason != "" {
			// A move no attempt's end announced: a skip, said here.
			fmt.Fprintf(p.a.stderr, "limitscope: failed over from %s to %s without a request: %s\n",
				sanitize.Text(m.From.String()), sanitize.Text(m.To.String()), sanitize.Text(m.Reason))
		}
	}
	var waited time.Duration
	for _, at := range res.Attempts {
		waited += at.Paced + at.Waited
	}
	where := "real provider"
	if provs.Simulated {
		where = "simulator, scenario " + provs.Scenario
	}
	n := len(res.Attempts)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	switch res.Outcome {
	case retry.OutcomeOK:
		fmt.Fprintf(p.a.stderr, "limitscope: served by %s/%s from the %s · %d attempt%s · waited %s · %s\n",
			sanitize.Text(res.ServedBy.Provider), sanitize.Text(res.ServedBy.Model), where, n, plural, roundDur(waited), roundDur(res.Ended.Sub(res.Started)))
	default:
		msg := ""
		if res.Err != nil {
			msg = res.Err.Error()
		}
		fmt.Fprintf(p.a.stderr, "limitscope: %s after %d attempt%s (%s): %s\n", res.Outcome, n, plural, where, sanitize.Text(msg))
		switch {
		case res.Outcome == retry.OutcomeDeferred && !res.RetryAt.IsZero():
			fmt.Fprintf(p.a.stderr, "limitscope: retry at %s\n", res.RetryAt.UTC().Format(time.RFC3339))
		case res.CooldownHit && !res.CooldownUntil.IsZero():
			fmt.Fprintf(p.a.stderr, "limitscope: cooling down until %s (limitscope cooldowns clear, or --ignore-cooldown)\n", res.CooldownUntil.UTC().Format(time.RFC3339))
		case res.CooldownHit:
			fmt.Fprintln(p.a.stderr, "limitscope: cooling down until cleared (limitscope cooldowns clear, or --ignore-cooldown)")
		}
	}
}
