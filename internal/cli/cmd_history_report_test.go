package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// recordReportSession records one session on the simulator through the
// real engine, stream client and recorder: a failover (a 429 asking longer
// than the failover wait), a broken stream (mid-stream error, retried), and
// a quota stop (a spend cap). It returns the history file.
func recordReportSession(t *testing.T) string {
	t.Helper()
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", Seed: 11, TokensPerSecond: 400, FirstTokenDelay: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hc := stream.NewHTTPClient()
	defer hc.CloseIdleConnections()
	eps := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		eps[p.Name] = r.Endpoint(p.Name)
	}
	db := filepath.Join(t.TempDir(), "history.db")
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "send"}, store.Options{Retention: -1})
	// The wall clock: the timeline shows real durations (the one backoff
	// waits about half a second).
	eng := &retry.Engine{Doer: &stream.Router{Client: &stream.Client{HTTP: hc}, Endpoints: eps},
		Cooldowns: rec.Cooldowns(), Pacer: retry.NewPacer()}
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	gq := stream.Target{Provider: "groq", Model: "llama-3.3-70b-versatile"}
	steps := []struct {
		fault sim.Fault
		chain []stream.Target
		want  retry.Outcome
	}{
		{sim.Fault{}, []stream.Target{oa}, retry.OutcomeOK},
		{sim.Fault{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 30 * time.Second}, []stream.Target{oa, an}, retry.OutcomeOK},
		{sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream}, []stream.Target{an}, retry.OutcomeOK},
		{sim.Fault{Provider: "groq", Kind: sim.FaultSpendCap}, []stream.Target{gq}, retry.OutcomeStopped},
		{sim.Fault{}, []stream.Target{an}, retry.OutcomeOK},
	}
	for i, s := range steps {
		if s.fault.Kind != "" {
			if err := r.Server.Inject(s.fault); err != nil {
				t.Fatal(err)
			}
		}
		call := retry.Call{Chain: s.chain, Prompt: "the report's prompt, never shown", MaxTokens: 64}
		if res := eng.Run(context.Background(), call, rec.Sink(call, nil)); res.Outcome != s.want {
			t.Fatalf("call %d: %s (%v), want %s", i, res.Outcome, res.Err, s.want)
		}
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestHistoryReportOfASession writes the report of a session with a
// failover, a broken stream and a quota stop, checks what it says, that it
// fetches nothing and holds no key, and opens it in headless Chromium.
func TestHistoryReportOfASession(t *testing.T) {
	clearEnv(t)
	db := recordReportSession(t)
	out := filepath.Join(t.TempDir(), "report.html")
	ta := newTestApp(map[string]string{"LIMITSCOPE_DB": db})
	if code := run(context.Background(), ta.app, []string{"history", "report", "--out", out}); code != exitOK {
		t.Fatalf("history report: exit %d\n%s", code, ta.errOut.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if p := os.Getenv("LIMITSCOPE_REPORT_HTML"); p != "" {
		_ = os.WriteFile(p, b, 0o600)
	}
	for _, want := range []string{
		"session 1 (send, simulated)",
		`<b>5</b>calls`, `<b>1</b>failovers`, `<b>1</b>quota stops`, `<b>1</b>broken streams`,
		"openai/gpt-5.4-mini</td><td>anthropic/claude-haiku-4-5</td><td>rate_limit (HTTP 429", // the failover and its reason
		"the server asked 30s, more than the failover wait",                                   // ... in words
		"<td>anthropic/claude-haiku-4-5</td><td>backoff</td>",                                 // a wait with its source
		`class="badge c-broken">B</span></td><td>overload (mid-stream)`,                       // the broken stream's attempt
		`class="badge c-quota">Q</span>`,                                                      // the quota stop
		`<details class="call" id="call-4">`, `<span class="o-stopped">stopped</span>`,        // a call, one click from its attempts
		`<svg id="timeline-svg"`, `<polyline class="req"`, "<td>groq</td>", // timeline, limits, providers
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(page, "the report's prompt") {
		t.Error("the report shows the prompt")
	}
	// Nothing is fetched at view time: no URL but the SVG namespace's and
	// the marker's own fragment.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|url\(|<script|<link|@import`).FindString(strings.ReplaceAll(page, "url(#head)", "")); m != "" {
		t.Errorf("the report refers to something outside it: %q", m)
	}
	// The leak scan: the simulator's key, and anything shaped like a key.
	if strings.Contains(page, sim.FakeKey) || regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}|\bgsk_[A-Za-z0-9]{16,}|(?i)bearer\s+\S{16,}`).MatchString(page) {
		t.Error("the report holds a key")
	}
	if fi, err := os.Stat(out); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("report file mode %v, want 0600", fi.Mode().Perm())
	}

	openInChromium(t, out)
}

// openInChromium loads the report in Debian's chromium, headless over the
// DevTools protocol, with every network access refused (a dead proxy, and
// no name resolves): the page must load with no console message of level
// error or warning and no exception, fetch nothing, open a call's attempts
// on a click, and be captured as a screenshot (LIMITSCOPE_REPORT_PNG keeps
// it at that path).
func openInChromium(t *testing.T, file string) {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI (.ci/run installs it): %v", err)
		}
		t.Skip("chromium not installed: skipping the browser check (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in a container: chromium's sandbox needs its own flag
		chromedp.Flag("headless", true),
		chromedp.Flag("proxy-server", "127.0.0.1:1"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var mu sync.Mutex
	var problems, requests []string
	// The first call starts the browser (on ctx, which has no timeout: a
	// timeout on it would stop the browser).
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console "+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, "log "+string(e.Entry.Level)+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
		case *network.EventLoadingFailed:
			problems = append(problems, "loading failed: "+e.ErrorText)
		}
	}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	url := "file://" + file
	if err := chromedp.Do(tctx, chromedp.Navigate(url), chromedp.WaitVisible("#timeline-svg")); err != nil {
		t.Fatalf("chromium: loading the report: %v", err)
	}
	title, err := chromedp.Run(tctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	marks, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('#timeline-svg g.mark').length`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tctx, chromedp.Click(`#call-2 > summary`)); err != nil {
		t.Fatalf("clicking a call: %v", err)
	}
	opened, err := chromedp.Run(tctx, chromedp.Evaluate[bool](
		`document.querySelector('#call-2').open && document.querySelector('#call-2 table.attempts').getBoundingClientRect().height > 0`))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if title != "limitscope report" || marks != 7 {
		t.Errorf("page title %q, %d attempt marks: want the report with every attempt", title, marks)
	}
	if !opened {
		t.Error("a click on a call did not show its attempts")
	}
	if len(png) < 10_000 || string(png[1:4]) != "PNG" {
		t.Errorf("screenshot of %d bytes", len(png))
	}
	if p := os.Getenv("LIMITSCOPE_REPORT_PNG"); p != "" {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range requests {
		if u != url {
			t.Errorf("the page fetched %s", u)
		}
	}
	for _, p := range problems {
		t.Errorf("in the browser: %s", p)
	}
}

// TestHistoryReportRanges: a time range selects by start time, an unknown
// session fails, and the report goes to stdout without --out.
func TestHistoryReportRanges(t *testing.T) {
	clearEnv(t)
	db := recordReportSession(t)
	report := func(args ...string) (int, string, string) {
		ta := newTestApp(map[string]string{"LIMITSCOPE_DB": db})
		code := run(context.Background(), ta.app, append([]string{"history", "report"}, args...))
		return code, ta.out.String(), ta.errOut.String()
	}
	if code, out, _ := report("--since", "1d"); code != exitOK || !strings.Contains(out, "<b>5</b>calls") || !strings.Contains(out, "calls since 1d") {
		t.Errorf("--since 1d: exit %d, %d bytes", code, len(out))
	}
	if code, out, errOut := report("--since", "1d", "--until", "1d"); code != exitOK || !strings.Contains(out, "<b>0</b>calls") || !strings.Contains(errOut, "no calls") {
		t.Errorf("--until 1d (before every call): exit %d, %q", code, errOut)
	}
	if code, out, _ := report("--session", "1", "--provider", "groq"); code != exitOK || !strings.Contains(out, "<b>1</b>calls") {
		t.Errorf("--session 1 --provider groq: exit %d", code)
	}
	if code, _, errOut := report("--session", "9"); code == exitOK || !strings.Contains(errOut, "session 9") {
		t.Errorf("--session 9: exit %d, %q; want a failure naming it", code, errOut)
	}
}
