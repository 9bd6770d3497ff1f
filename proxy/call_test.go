package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// A route's policy is layered field by field: the alias's, the file's, the
// command's flags, the defaults; failover_on_quota as the alias says it,
// even when it says false.
func TestRoutePolicyLayers(t *testing.T) {
	c, err := ParseConfig([]byte(`{
		"policy": {"max_attempts": 4, "deadline": "1m"},
		"aliases": {
			"q":     {"chain": ["openai/a", "anthropic/b"], "policy": {"failover_on_quota": true, "tries_per_target": 1}},
			"noq":   {"chain": ["openai/a", "anthropic/b"], "policy": {"failover_on_quota": false, "deadline": "30s"}},
			"plain": ["openai/a"]
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	flags := retry.Policy{MaxAttempts: 9, Deadline: 20 * time.Second, FailoverWait: 3 * time.Second, FailoverOnQuota: true}
	def := retry.DefaultPolicy()
	for _, tc := range []struct {
		name string
		got  retry.Policy
		want retry.Policy
	}{
		{"alias on", c.RoutePolicy(c.Aliases["q"], flags), retry.Policy{MaxAttempts: 4, TriesPerTarget: 1, FailoverWait: 3 * time.Second,
			Deadline: time.Minute, FailoverOnQuota: true}},
		{"alias off beats the flag", c.RoutePolicy(c.Aliases["noq"], flags), retry.Policy{MaxAttempts: 4, FailoverWait: 3 * time.Second,
			Deadline: 30 * time.Second}},
		{"no alias policy: file then flags", c.RoutePolicy(c.Aliases["plain"], flags), retry.Policy{MaxAttempts: 4, FailoverWait: 3 * time.Second,
			Deadline: time.Minute, FailoverOnQuota: true}},
		{"provider/model route", c.RoutePolicy(Alias{}, retry.Policy{}), retry.Policy{MaxAttempts: 4, Deadline: time.Minute}},
		{"no config", (*Config)(nil).RoutePolicy(Alias{}, flags), flags},
		{"nothing set", (*Config)(nil).RoutePolicy(Alias{}, retry.Policy{}), def},
	} {
		if want := tc.want.WithDefaults(); tc.got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, tc.got, want)
		}
	}
	if a := c.Aliases["noq"]; a.FailoverOnQuota == nil || *a.FailoverOnQuota {
		t.Errorf("noq's failover_on_quota %v, want an explicit false", a.FailoverOnQuota)
	}
	if _, err := ParseConfig([]byte(`{"aliases": {"x": {"chain": ["openai/m"], "policy": {"failover_on_quota": "yes"}}}}`)); err == nil {
		t.Error(`failover_on_quota "yes" accepted`)
	}
}

// The engine gets the layered policy; a streamed call may not be retried
// once text reached the caller, an unstreamed one may.
func TestPolicyReachesTheEngine(t *testing.T) {
	on := true
	cfg := &Config{Aliases: map[string]Alias{"q": {Name: "q", FailoverOnQuota: &on,
		Policy: &retry.Policy{TriesPerTarget: 1}, Chain: []stream.Target{{Provider: "openai", Model: "a"}}}}}
	var mu sync.Mutex
	var pols []retry.Policy
	_, srv := newServer(t, Options{Engine: eng(okDoer()), Config: cfg, DefaultPolicy: retry.Policy{MaxAttempts: 7, Deadline: time.Minute},
		Events: func(c retry.Call, ev retry.Event) {
			if ev.Kind == retry.EventCallStart {
				mu.Lock()
				pols = append(pols, c.Policy)
				mu.Unlock()
			}
		}})
	e := &env{t: t, srv: srv}
	for _, body := range []string{
		`{"model":"q","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"q","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"openai/a","messages":[{"role":"user","content":"hi"}]}`,
	} {
		if r := e.do(e.openAIReq(body)); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pols) != 3 {
		t.Fatalf("%d calls", len(pols))
	}
	for i, p := range pols {
		if p.MaxAttempts != 7 || p.Deadline != time.Minute {
			t.Errorf("call %d: flags not applied: %+v", i, p)
		}
	}
	if p := pols[0]; !p.NoRetryAfterText || !p.FailoverOnQuota || p.TriesPerTarget != 1 {
		t.Errorf("streamed alias call: %+v", p)
	}
	if p := pols[1]; p.NoRetryAfterText || !p.FailoverOnQuota {
		t.Errorf("unstreamed alias call: %+v", p)
	}
	if p := pols[2]; p.NoRetryAfterText || p.FailoverOnQuota {
		t.Errorf("provider/model call: %+v", p)
	}
}

// With failover_on_quota in its alias, a quota stop on the primary moves
// the call to a target on another account (engine: Policy.FailoverOnQuota);
// the cooldown is still recorded.
func TestAliasFailoverOnQuota(t *testing.T) {
	on := true
	cfg := &Config{Aliases: map[string]Alias{"q": {Name: "q", FailoverOnQuota: &on, Chain: []stream.Target{
		{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}}}}}
	e := newEnv(t, cfg, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap, Count: 5})
	r := e.do(e.openAIReq(`{"model":"q","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 200 || r.header.Get(HeaderServedBy) != "anthropic/claude-haiku-5-5" {
		t.Fatalf("status %d served by %q: %s", r.status, r.header.Get(HeaderServedBy), r.body)
	}
	if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 1 {
		t.Errorf("requests openai %d anthropic %d, want 1 and 1", a, b)
	}
	// The stop is remembered: openai alone is not called again.
	r = e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 429 || e.requests("openai") != 1 {
		t.Errorf("after the quota stop: status %d, openai saw %d requests", r.status, e.requests("openai"))
	}
}

// logWriter logs every write of a response, for the order of commit and
// answer.
type logWriter struct {
	http.ResponseWriter
	log func(string)
}

func (l logWriter) Write(b []byte) (int, error) {
	l.log("write " + string(b))
	return l.ResponseWriter.Write(b)
}

func (l logWriter) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// The call's history record is committed after its call_end reached the
// recorder and before the answer completes: the end of a stream, a whole
// answer and an error answer are all written after Commit returns.
func TestCommitBeforeTheAnswerCompletes(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	var log []string
	add := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	d := &funcDoer{f: func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		if req.Target.Provider == "anthropic" {
			return stream.Result{Status: 429, Err: &stream.Error{Status: 429, Class: stream.ClassQuota, Code: "billing_error", Message: "no credit"}}
		}
		onText("fine ")
		onText("thanks")
		return stream.Result{Text: "fine thanks", FinishReason: "stop"}
	}}
	h, err := New(Options{Token: testToken, Engine: eng(d),
		Record: func(c retry.Call, next func(retry.Event)) func(retry.Event) {
			return func(ev retry.Event) {
				if ev.Kind == retry.EventCallEnd {
					add("call_end " + ev.CallID)
				}
				next(ev)
			}
		},
		Commit: func(ctx context.Context, id string) error {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("commit without a deadline")
			}
			add("commit " + id)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(logWriter{ResponseWriter: w, log: add}, r)
	}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv}
	for _, c := range []struct {
		name, body string
		anthropic  bool
		last       string // in the answer's last write
	}{
		{"openai stream", `{"model":"openai/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false, "[DONE]"},
		{"anthropic stream", `{"model":"openai/m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true, "message_stop"},
		{"plain", `{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`, false, "fine thanks"},
		{"error", `{"model":"anthropic/m","messages":[{"role":"user","content":"hi"}]}`, false, "no credit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			log = nil
			mu.Unlock()
			var r reply
			if c.anthropic {
				r = e.do(e.anthropicReq(c.body))
			} else {
				r = e.do(e.openAIReq(c.body))
			}
			id := r.header.Get(HeaderRequestID)
			mu.Lock()
			defer mu.Unlock()
			end, commit, last := -1, -1, -1
			for i, l := range log {
				switch {
				case l == "call_end "+id:
					end = i
				case l == "commit "+id:
					if commit >= 0 {
						t.Errorf("committed twice")
					}
					commit = i
				case strings.HasPrefix(l, "write ") && strings.Contains(l, c.last):
					last = i
				}
			}
			if end < 0 || commit < end || last < commit {
				t.Errorf("call_end at %d, commit at %d, the answer's end at %d: want them in that order\n%q", end, commit, last, log)
			}
		})
	}
}

// A failed commit is told in the log, and the caller still gets the answer.
func TestCommitFailureIsLogged(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	_, srv := newServer(t, Options{Engine: eng(okDoer()),
		Commit: func(ctx context.Context, id string) error { return errors.New("history.db: database is locked") },
		Logf: func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(f, a...))
		}})
	e := &env{t: t, srv: srv}
	r := e.do(e.openAIReq(`{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 200 {
		t.Errorf("status %d: %s", r.status, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		found = found || (strings.Contains(l, "did not record") && strings.Contains(l, "database is locked") && strings.Contains(l, r.header.Get(HeaderRequestID)))
	}
	if !found {
		t.Errorf("no log line for the failed commit: %q", lines)
	}
}

// A proxied stream that broke after it began is recorded as what broke it
// (not "cancelled"), with the partial text the caller got, in one attempt.
func TestBrokenStreamRecordedAsItsBreak(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider string
		fault    string
		class    stream.Class
		body     string
	}{
		{"mid-stream error", "openai", sim.FaultMidStream, stream.ClassOverload,
			`{"model":"openai/gpt-5.4-mini","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Tell me a long story"}]}`},
		{"cut", "anthropic", sim.FaultCut, "",
			`{"model":"anthropic/claude-haiku-5-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Tell me a long story"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "history.db")
			rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "proxy"}, store.Options{})
			e := newEnv(t, nil, func(o *Options) { o.Record = rec.Sink })
			e.inject(sim.Fault{Provider: c.provider, Kind: c.fault})
			r := e.do(e.openAIReq(c.body))
			s := readOpenAIStream(t, r.body)
			if s.text == "" || s.err == nil {
				t.Fatalf("text %q err %v: want partial text and an error", s.text, s.err)
			}
			e.mu.Lock()
			var res *retry.Result
			for _, ev := range e.events {
				if ev.Kind == retry.EventCallEnd {
					res = ev.Result
				}
			}
			e.mu.Unlock()
			if res == nil {
				t.Fatal("no call_end")
			}
			if res.Outcome == retry.OutcomeCancelled || res.Outcome == retry.OutcomeOK || res.Err == nil {
				t.Errorf("outcome %s err %v, want the break's", res.Outcome, res.Err)
			} else if c.class != "" && res.Err.Class != c.class {
				t.Errorf("class %s, want %s", res.Err.Class, c.class)
			}
			if len(res.Attempts) != 1 || res.Attempts[0].PartialText != s.text || res.Attempts[0].Decision == retry.DecideCancel {
				t.Errorf("attempts %+v, want one with the caller's text %q", res.Attempts, s.text)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := rec.Close(ctx); err != nil {
				t.Fatal(err)
			}
			calls, err := (&store.Reader{Path: db}).List(ctx, store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0].Outcome != res.Outcome {
				t.Errorf("history %+v, want one call, %s", calls, res.Outcome)
			}
		})
	}
}
