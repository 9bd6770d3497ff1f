package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/calls"
)

// TestSharedFlagsInEveryCallingCommand: send, the console and proxy each
// hold every shared call flag (history, policy, timeouts, simulator), with
// the same defaults, from one definition; --model, --fallback and
// --max-tokens are send's and the console's only.
func TestSharedFlagsInEveryCallingCommand(t *testing.T) {
	ref := flag.NewFlagSet("ref", flag.ContinueOnError)
	var f calls.Flags
	f.Register(ref)
	want := []string{"keep", "db", "no-history", "no-content", "deadline", "max-attempts", "tries-per-target",
		"failover-wait", "max-wait", "header-timeout", "first-token-timeout", "stall-timeout", "no-progress-timeout",
		"sim", "scenario", "scenario-file", "seed", "answer", "failover-on-quota"}
	for _, n := range want {
		if ref.Lookup(n) == nil {
			t.Errorf("the shared flags lack --%s", n)
		}
	}
	sets := map[string]*flag.FlagSet{}
	for name, reg := range map[string]func(*flag.FlagSet){
		"send":    func(fs *flag.FlagSet) { newSendOpts(fs) },
		"console": func(fs *flag.FlagSet) { newConsoleOpts(fs) },
		"proxy":   func(fs *flag.FlagSet) { newProxyOpts(fs) },
	} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		reg(fs)
		sets[name] = fs
	}
	for name, fs := range sets {
		ref.VisitAll(func(r *flag.Flag) {
			got := fs.Lookup(r.Name)
			if got == nil {
				t.Errorf("%s lacks --%s", name, r.Name)
				return
			}
			if got.DefValue != r.DefValue || got.Usage != r.Usage {
				t.Errorf("%s --%s: default %q usage %q, want %q %q", name, r.Name, got.DefValue, got.Usage, r.DefValue, r.Usage)
			}
		})
		for _, own := range []string{"model", "fallback", "max-tokens"} {
			has := fs.Lookup(own) != nil
			if has != (name != "proxy") {
				t.Errorf("%s: --%s present=%v", name, own, has)
			}
		}
	}
	if sets["send"].Lookup("max-tokens").DefValue != sets["console"].Lookup("max-tokens").DefValue {
		t.Error("send and the console differ on --max-tokens' default")
	}
}

// TestBadFlagIsOneLine: a bad flag prints one line that points to --help,
// never the whole usage.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"send", "--nope", "hi"},
		{"send", "--max-attempts", "x", "hi"},
		{"proxy", "--nope"},
		{"--nope"},
		{"history", "list", "--nope"},
		{"cooldowns", "--nope"},
		{"info", "--nope"},
		{"nosuchcommand"},
	} {
		ta := newTestApp(nil)
		code := run(t.Context(), ta.app, args)
		errOut := ta.errOut.String()
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
		if n := strings.Count(strings.TrimRight(errOut, "\n"), "\n"); n != 0 || !strings.Contains(errOut, "--help") {
			t.Errorf("%v: want one line pointing to --help, got:\n%s", args, errOut)
		}
		if ta.out.Len() != 0 {
			t.Errorf("%v: stdout %q", args, ta.out.String())
		}
	}
}

// TestHelpListsEverything: limitscope --help shows the console's flags and
// every subcommand with its arguments; cooldowns --help shows clear [SCOPE].
func TestHelpListsEverything(t *testing.T) {
	ta := newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"--help"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	out := ta.out.String()
	for _, want := range []string{"-mouse", "-proxy-config", "-model", "-failover-on-quota", "-no-progress-timeout",
		"send --model", "PROMPT", "sim [--listen ADDR]", "history show ID", "history stats", "history export",
		"history prune", "history sessions", "history repair", "cooldowns clear [SCOPE]", "bench --model",
		"proxy [--listen ADDR]", "info", "version"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, args := range [][]string{{"cooldowns", "--help"}, {"cooldowns", "clear", "--help"}} {
		ta := newTestApp(nil)
		if code := run(t.Context(), ta.app, args); code != exitOK {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !strings.Contains(ta.out.String(), "cooldowns clear [SCOPE]") {
			t.Errorf("%v lacks clear [SCOPE]:\n%s", args, ta.out.String())
		}
	}
	for _, args := range [][]string{{"send", "--help"}, {"proxy", "--help"}, {"history", "list", "--help"}, {"info", "--help"}} {
		ta := newTestApp(nil)
		if code := run(t.Context(), ta.app, args); code != exitOK || !bytes.Contains(ta.out.Bytes(), []byte("Usage")) {
			t.Errorf("%v: exit %d, stdout:\n%s", args, code, ta.out.String())
		}
	}
}
