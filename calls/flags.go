package calls

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Flags are the flags every calling command (send, the console, proxy)
// shares: the policy's defaults, the timeouts, the history and the
// simulator. Register them on a command's flag set with Register.
type Flags struct {
	Policy  retry.Policy   // --max-attempts ... --failover-on-quota, --ignore-cooldown
	Stream  stream.Options // the timeouts
	History HistoryFlags
	Sim     SimFlags
	// State is --state: the shared state's Redis URL ("": none, unless
	// LIMITSCOPE_REDIS_URL names one; see StateURL).
	State string
}

// StateURL is the shared state's Redis URL: --state, else
// LIMITSCOPE_REDIS_URL, else "" (this process's own state alone).
func (f *Flags) StateURL(getenv func(string) string) string {
	if f.State != "" || getenv == nil {
		return f.State
	}
	return getenv("LIMITSCOPE_REDIS_URL")
}

// HistoryFlags say where and whether calls are recorded.
type HistoryFlags struct {
	DB        string // --db: the history file ("" => store.DefaultPath)
	NoHistory bool   // --no-history
	NoContent bool   // --no-content: metadata only
	Keep      string // --keep: retention, an age ("90d"); "0" keeps everything
}

// SimFlags choose the embedded simulator.
type SimFlags struct {
	Sim          bool   // --sim (or LIMITSCOPE_SIM=1)
	Scenario     string // --scenario ("" => calm, or the scenario file's own)
	ScenarioFile string // --scenario-file
	Seed         int64  // --seed (0: a fresh seed per run)
	Answer       string // --answer: the answers' shape
}

// DefaultKeep is --keep's default.
const DefaultKeep = "90d"

// Register adds the shared flags to fs, with their defaults, once for every
// calling command.
func (f *Flags) Register(fs *flag.FlagSet) {
	def := retry.DefaultPolicy()
	sdef := stream.DefaultOptions()
	f.Policy, f.Stream = def, sdef
	fs.IntVar(&f.Policy.MaxAttempts, "max-attempts", def.MaxAttempts, "HTTP requests for the whole call")
	fs.IntVar(&f.Policy.TriesPerTarget, "tries-per-target", def.TriesPerTarget, "requests per target (the last target may use what is left)")
	fs.DurationVar(&f.Policy.FailoverWait, "failover-wait", def.FailoverWait, "a longer server delay moves to the next target at once")
	fs.DurationVar(&f.Policy.MaxWait, "max-wait", def.MaxWait, "a longer server delay with no fallback left defers the call")
	f.Policy.DeadlineIsDefault = true
	fs.Var(deadlineValue{&f.Policy}, "deadline", "the whole call's time budget, a `duration` (unset: a chain with a flex target gets its flex timeout on top)")
	fs.BoolVar(&f.Policy.IgnoreCooldown, "ignore-cooldown", false, "send even when a quota cooldown blocks the target")
	fs.BoolVar(&f.Policy.FailoverOnQuota, "failover-on-quota", false, "on a quota or billing stop, fail over to a target on another account (the stop is still recorded; a person must still act)")
	fs.DurationVar(&f.Stream.HeaderTimeout, "header-timeout", sdef.HeaderTimeout, "time to the response headers")
	fs.DurationVar(&f.Stream.FirstTokenTimeout, "first-token-timeout", sdef.FirstTokenTimeout, "time to the first content")
	fs.DurationVar(&f.Stream.StallTimeout, "stall-timeout", sdef.StallTimeout, "silence on the wire before a stream counts as stalled")
	fs.DurationVar(&f.Stream.NoProgressTimeout, "no-progress-timeout", sdef.NoProgressTimeout, "time since the last model output (keep-alives do not count) before a stream counts as stalled (0: the default)")
	fs.BoolVar(&f.History.NoHistory, "no-history", false, "do not record calls in the history")
	fs.BoolVar(&f.History.NoContent, "no-content", false, "record metadata only, not prompts and answers")
	fs.StringVar(&f.History.Keep, "keep", DefaultKeep, "history retention: older calls are deleted in the background (e.g. 30d, 12h; 0 keeps everything)")
	fs.StringVar(&f.History.DB, "db", "", "history database (default $LIMITSCOPE_DB, else $XDG_STATE_HOME/limitscope/history.db)")
	fs.BoolVar(&f.Sim.Sim, "sim", false, "use the built-in simulator (also LIMITSCOPE_SIM=1)")
	fs.StringVar(&f.Sim.Scenario, "scenario", "", "simulator scenario (default calm, or the scenario file's own; see limitscope sim --list)")
	fs.StringVar(&f.Sim.ScenarioFile, "scenario-file", "", "simulator scenario file (see sim/README.md)")
	fs.Int64Var(&f.Sim.Seed, "seed", 0, "the simulator's seed for its answers and fault draws (0: a fresh seed per run)")
	fs.StringVar(&f.State, "state", "", "share limits, cooldowns and a live fleet view through Redis: redis://HOST:PORT/DB or rediss:// (also LIMITSCOPE_REDIS_URL; password from the URL or REDISCLI_AUTH)")
	fs.StringVar(&f.Sim.Answer, "answer", "", "the simulator's answer shape (words, paragraph:1MB, paragraphs, code; see sim/README.md)")
}

// Validate checks the shared flags' values.
func (f *Flags) Validate() error {
	p, s := f.Policy, f.Stream
	switch {
	case p.MaxAttempts < 1:
		return errors.New("--max-attempts must be at least 1")
	case p.TriesPerTarget < 1:
		return errors.New("--tries-per-target must be at least 1")
	case p.FailoverWait < 0, p.MaxWait < 0, p.Deadline <= 0:
		return errors.New("--failover-wait and --max-wait must not be negative, --deadline must be positive")
	case s.HeaderTimeout <= 0, s.FirstTokenTimeout <= 0, s.StallTimeout <= 0:
		return errors.New("timeouts must be positive")
	case s.NoProgressTimeout < 0:
		return errors.New("--no-progress-timeout must not be negative")
	}
	if _, err := ParseAge(f.History.Keep); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	if f.State != "" {
		if _, err := fleet.ParseURL(f.State, nil); err != nil {
			return fmt.Errorf("--state: %w", err)
		}
	}
	return nil
}

// Retention is --keep as the recorder wants it: negative keeps everything.
func (h HistoryFlags) Retention() time.Duration {
	d, _ := ParseAge(h.Keep)
	if d <= 0 {
		return -1
	}
	return d
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// TargetFlags are the flags of the commands that name their own targets
// (send and the console; the proxy's callers name theirs per request).
type TargetFlags struct {
	Model     string   // --model: the primary, provider/model
	Fallbacks []string // --fallback (repeatable)
	MaxTokens int      // --max-tokens
}

// DefaultMaxTokens is --max-tokens' default.
const DefaultMaxTokens = 1024

// Register adds --model, --fallback and --max-tokens to fs.
func (t *TargetFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.Model, "model", "", "the primary target, provider/model (e.g. openai/gpt-5.4-mini)")
	fs.Var((*stringList)(&t.Fallbacks), "fallback", "a fallback target, provider/model (repeatable, tried in order)")
	fs.IntVar(&t.MaxTokens, "max-tokens", DefaultMaxTokens, "maximum output tokens, sent to every provider")
}

// Validate checks the target flags' values.
func (t *TargetFlags) Validate() error {
	if t.MaxTokens < 1 {
		return errors.New("--max-tokens must be at least 1")
	}
	return nil
}

// Chain parses --model and --fallback into targets.
func (t *TargetFlags) Chain() ([]stream.Target, error) {
	if t.Model == "" {
		return nil, errors.New("--model is required (provider/model, e.g. openai/gpt-5.4-mini)")
	}
	var chain []stream.Target
	for _, s := range append([]string{t.Model}, t.Fallbacks...) {
		tg, err := stream.ParseTarget(s)
		if err != nil {
			return nil, err
		}
		chain = append(chain, tg)
	}
	return chain, nil
}

// deadlineValue is --deadline: a duration that, once given, is the
// caller's choice (Policy.DeadlineIsDefault false).
type deadlineValue struct{ p *retry.Policy }

// String implements flag.Value.
func (v deadlineValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.Deadline.String()
}

// Set implements flag.Value.
func (v deadlineValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse error: %w", err)
	}
	v.p.Deadline, v.p.DeadlineIsDefault = d, false
	return nil
}
