package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// maxPromptBytes bounds a prompt read from stdin.
const maxPromptBytes = 8 << 20

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// callFlags are the flags of every command that sends calls.
type callFlags struct {
	model     string
	fallbacks stringList
	maxTokens int
	policy    retry.Policy
	stream    stream.Options
	session   sessionFlags
	noHistory bool
	noContent bool
	db        string
	keep      string
}

func (cf *callFlags) register(fs *flag.FlagSet) {
	def := retry.DefaultPolicy()
	sdef := stream.DefaultOptions()
	cf.stream = sdef
	fs.StringVar(&cf.model, "model", "", "the primary target, provider/model (e.g. openai/gpt-5.4-mini)")
	fs.Var(&cf.fallbacks, "fallback", "a fallback target, provider/model (repeatable, tried in order)")
	fs.IntVar(&cf.maxTokens, "max-tokens", 1024, "maximum output tokens, sent to every provider")
	fs.IntVar(&cf.policy.MaxAttempts, "max-attempts", def.MaxAttempts, "HTTP requests for the whole call")
	fs.IntVar(&cf.policy.TriesPerTarget, "tries-per-target", def.TriesPerTarget, "requests per target (the last target may use what is left)")
	fs.DurationVar(&cf.policy.FailoverWait, "failover-wait", def.FailoverWait, "a longer server delay moves to the next target at once")
	fs.DurationVar(&cf.policy.MaxWait, "max-wait", def.MaxWait, "a longer server delay with no fallback left defers the call")
	fs.DurationVar(&cf.policy.Deadline, "deadline", def.Deadline, "the whole call's time budget, checked before every wait")
	fs.DurationVar(&cf.stream.HeaderTimeout, "header-timeout", sdef.HeaderTimeout, "time to the response headers")
	fs.DurationVar(&cf.stream.FirstTokenTimeout, "first-token-timeout", sdef.FirstTokenTimeout, "time to the first content")
	fs.DurationVar(&cf.stream.StallTimeout, "stall-timeout", sdef.StallTimeout, "silence on the wire before a stream counts as stalled")
	fs.BoolVar(&cf.policy.IgnoreCooldown, "ignore-cooldown", false, "send even when a quota cooldown blocks the target")
	fs.BoolVar(&cf.noHistory, "no-history", false, "do not record the call in the history")
	fs.BoolVar(&cf.noContent, "no-content", false, "record metadata only, not the prompt and answer")
	fs.StringVar(&cf.keep, "keep", "90d", "history retention: older calls are deleted in the background (e.g. 30d, 12h; 0 keeps everything)")
	fs.StringVar(&cf.db, "db", "", "history database (default $LIMITSCOPE_DB, else $XDG_STATE_HOME/limitscope/history.db)")
	fs.BoolVar(&cf.session.sim, "sim", false, "use the built-in simulator (also LIMITSCOPE_SIM=1)")
	fs.StringVar(&cf.session.scenario, "scenario", "calm", "simulator scenario (see limitscope sim --list)")
	fs.StringVar(&cf.session.scenarioFile, "scenario-file", "", "simulator scenario file")
}

// chain parses --model and --fallback into targets.
func (cf *callFlags) chain() ([]stream.Target, error) {
	if cf.model == "" {
		return nil, errors.New("--model is required (provider/model, e.g. openai/gpt-5.4-mini)")
	}
	var chain []stream.Target
	for _, s := range append([]string{cf.model}, cf.fallbacks...) {
		t, err := stream.ParseTarget(s)
		if err != nil {
			return nil, err
		}
		chain = append(chain, t)
	}
	return chain, nil
}

func (cf *callFlags) validate() error {
	switch {
	case cf.maxTokens < 1:
		return errors.New("--max-tokens must be at least 1")
	case cf.policy.MaxAttempts < 1:
		return errors.New("--max-attempts must be at least 1")
	case cf.policy.TriesPerTarget < 1:
		return errors.New("--tries-per-target must be at least 1")
	case cf.policy.FailoverWait < 0, cf.policy.MaxWait < 0, cf.policy.Deadline <= 0:
		return errors.New("--failover-wait and --max-wait must not be negative, --deadline must be positive")
	case cf.stream.HeaderTimeout <= 0, cf.stream.FirstTokenTimeout <= 0, cf.stream.StallTimeout <= 0:
		return errors.New("timeouts must be positive")
	}
	if _, err := parseAge(cf.keep); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	return nil
}

// retention is --keep as the recorder wants it: negative keeps everything.
func (cf *callFlags) retention() time.Duration {
	d, _ := parseAge(cf.keep)
	if d <= 0 {
		return -1
	}
	return d
}

func runSend(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintln(a.stderr, "Usage: limitscope send --model provider/model [--fallback provider/model]... [flags] PROMPT\n\nPROMPT - reads the prompt from stdin.\n\nFlags:")
		fs.PrintDefaults()
	}
	var cf callFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON document on stdout instead of streaming the answer")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope send: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		return fail(errors.New("want exactly one PROMPT argument (- reads stdin); see limitscope send -h"))
	}
	if err := cf.validate(); err != nil {
		return fail(err)
	}
	chain, err := cf.chain()
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

	simulated := a.simRequested(cf.session)
	if !simulated {
		// Check the keys before starting anything: a real provider is never
		// silently replaced by the simulator.
		for _, t := range chain {
			if _, err := stream.Resolve(t.Provider, a.getenv); err != nil {
				return fail(err)
			}
		}
	}
	sess, err := a.openSession(ctx, cf.session, simulated)
	if err != nil {
		return fail(err)
	}
	defer sess.close()
	if err := sess.check(chain); err != nil {
		return fail(err)
	}

	hist := a.openHistory(cf, sess.simulated, "send")
	defer hist.close(ctx, a)

	engine := &retry.Engine{
		Doer:      &stream.Router{Client: &stream.Client{Options: cf.stream, Now: a.now}, Endpoints: sess.endpoints},
		Clock:     a.clock,
		Cooldowns: hist.cooldowns(),
		Pacer:     retry.NewPacer(),
	}
	call := retry.Call{Chain: chain, Prompt: prompt, MaxTokens: cf.maxTokens, Policy: cf.policy}

	out := &sendPrinter{a: a, json: *asJSON}
	res := engine.Run(ctx, call, hist.sink(call, out.event))
	if *asJSON {
		doc := newSendDoc(res, sess.simulated)
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
		out.finish(res, sess)
	}
	return res.Outcome.ExitCode()
}

// sendPrinter streams an answer to stdout and notices to stderr.
type sendPrinter struct {
	a       *app
	json    bool
	printed bool // text of the current attempt was printed
	text    sanitize.Filter
}

func (p *sendPrinter) event(ev retry.Event) {
	if p.json {
		return
	}
	switch ev.Kind {
	case retry.EventText:
		// The answer is untrusted: no escape sequence reaches the terminal.
		io.WriteString(p.a.stdout, p.text.Text(ev.Text))
		p.printed = true
	case retry.EventAttemptEnd:
		at := ev.Attempt
		if at == nil {
			return
		}
		io.WriteString(p.a.stdout, p.text.Flush())
		if at.Class == stream.ClassOK {
			return
		}
		if p.printed {
			// The stream broke part-way: end the broken answer's line, and
			// say so on stderr; a retry's answer starts on a new line.
			fmt.Fprintln(p.a.stdout)
			p.printed = false
			fmt.Fprintf(p.a.stderr, "limitscope: the stream from %s broke after %d characters (%s); %s\n",
				sanitize.Text(at.Target.String()), len(at.PartialText), sanitize.Text(describeError(at.Class, at.Status, at.Code)), at.Decision)
		}
	case retry.EventWait:
		w := ev.Wait
		fmt.Fprintf(p.a.stderr, "limitscope: waiting %s before %s: %s\n", roundDur(w.Duration), sanitize.Text(w.Target.String()), sanitize.Text(w.Reason))
	}
}

func (p *sendPrinter) finish(res retry.Result, sess *session) {
	if p.printed {
		fmt.Fprintln(p.a.stdout)
	}
	var waited time.Duration
	for _, at := range res.Attempts {
		waited += at.Paced + at.Waited
	}
	where := "real provider"
	if sess.simulated {
		where = "simulator, scenario " + sess.scenario
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

func describeError(c stream.Class, status int, code string) string {
	s := string(c)
	if status != 0 {
		s = fmt.Sprintf("%d %s", status, s)
	}
	if code != "" {
		s += " " + code
	}
	return s
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
