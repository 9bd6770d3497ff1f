package proxy

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

func TestToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	p := TokenPath(dir)
	tok, err := LoadOrCreateToken(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "lsp-") || len(tok) != 4+64 {
		t.Errorf("token shape %d", len(tok))
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", di.Mode())
	}
	again, err := LoadOrCreateToken(p)
	if err != nil || again != tok {
		t.Errorf("second load: %v (same: %v)", err, again == tok)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(p); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("a readable token was not tightened: %v", fi.Mode())
	}
	if err := os.WriteFile(p, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(p); err == nil {
		t.Error("a junk token file was accepted")
	}
	if _, err := LoadOrCreateToken(""); err == nil {
		t.Error("no path accepted")
	}
}

func TestTokenConcurrentFirstUse(t *testing.T) {
	p := TokenPath(t.TempDir())
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], _ = LoadOrCreateToken(p)
		}()
	}
	wg.Wait()
	for _, tk := range toks {
		if tk != toks[0] || tk == "" {
			t.Fatalf("tokens differ: %q", toks)
		}
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{
		"policy": {"max_attempts": 3, "failover_wait": "5s", "deadline": 30},
		"max_tokens": 512,
		"aliases": {
			"fast": {"chain": ["openai/gpt-5.4-mini", "anthropic/claude-haiku-5-5"], "policy": {"tries_per_target": 1}, "max_tokens": 100},
			"smart": ["anthropic/claude-sonnet-4-5"]
		},
		"models": ["groq/meta-llama/llama-4"],
		"allowed_hosts": ["DevBox.lan"]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.MaxAttempts != 3 || c.Policy.FailoverWait != 5*time.Second || c.Policy.Deadline != 30*time.Second || c.MaxTokens != 512 {
		t.Errorf("policy %+v", c.Policy)
	}
	f := c.Aliases["fast"]
	if len(f.Chain) != 2 || f.Chain[1] != (stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}) || f.Policy == nil || f.Policy.TriesPerTarget != 1 || f.MaxTokens != 100 {
		t.Errorf("fast %+v", f)
	}
	if s := c.Aliases["smart"]; len(s.Chain) != 1 || s.Policy != nil {
		t.Errorf("smart %+v", s)
	}
	if len(c.Models) != 1 || c.Models[0].Model != "meta-llama/llama-4" || c.AllowedHosts[0] != "devbox.lan" {
		t.Errorf("models %v hosts %v", c.Models, c.AllowedHosts)
	}
	for _, bad := range []string{
		`{"alias": {}}`,
		`{"aliases": {"x": ["nope/m"]}}`,
		`{"aliases": {"x": []}}`,
		`{"aliases": {"a/b": ["openai/m"]}}`,
		`{"aliases": {"x": {"chain": ["openai/m"], "polcy": {}}}}`,
		`{"policy": {"deadline": "soon"}}`,
		`{"max_tokens": -1}`,
		`not json`,
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	path := filepath.Join(t.TempDir(), "proxy.json")
	if err := os.WriteFile(path, []byte(`{"aliases": {"x": ["openai"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not name the file: %v", err)
	}
}

// The conversation, system prompt, sampling and token cap reach the engine's
// request; the history hook sees the route and the client.
func TestConversationReachesTheDoer(t *testing.T) {
	clearEnv(t)
	d := retrytest.NewDoer().Always("anthropic/claude-haiku-5-5", retrytest.OK("fine"))
	var recorded []retry.Call
	var mu sync.Mutex
	h, err := New(Options{Token: testToken, Engine: eng(d), Record: func(c retry.Call, next func(retry.Event)) func(retry.Event) {
		mu.Lock()
		recorded = append(recorded, c)
		mu.Unlock()
		return next
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &env{t: t, srv: srv}
	r := e.do(e.openAIReq(`{"model":"claude-haiku-5-5","max_tokens":77,"temperature":0.3,"top_p":0.9,"stop":"END",
		"messages":[{"role":"system","content":"sys A"},{"role":"developer","content":"sys B"},
		{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":[{"type":"text","text":"thr"},{"type":"text","text":"ee"}]}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	reqs := d.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	q := reqs[0]
	want := []stream.Message{{Role: "user", Content: "one"}, {Role: "assistant", Content: "two"}, {Role: "user", Content: "three"}}
	if q.System != "sys A\n\nsys B" || !reflect.DeepEqual(q.Messages, want) || q.MaxTokens != 77 ||
		*q.Sampling.Temperature != 0.3 || *q.Sampling.TopP != 0.9 || !reflect.DeepEqual(q.Sampling.Stop, []string{"END"}) {
		t.Errorf("request %+v", q)
	}
	mu.Lock()
	if len(recorded) != 1 || recorded[0].Route != "claude-haiku-5-5" || recorded[0].Client != "OpenAI/Python 2.8.1" || recorded[0].Prompt != "three" {
		t.Errorf("recorded %+v", recorded)
	}
	mu.Unlock()

	// Anthropic's system as blocks, and stop_sequences.
	r = e.do(e.anthropicReq(`{"model":"claude-haiku-5-5","max_tokens":9,"system":[{"type":"text","text":"S"}],"stop_sequences":["x","y"],
		"messages":[{"role":"user","content":"q"}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	q = d.Requests()[1]
	if q.System != "S" || q.MaxTokens != 9 || !reflect.DeepEqual(q.Sampling.Stop, []string{"x", "y"}) {
		t.Errorf("request %+v", q)
	}
}

// A caller that leaves cancels the call at once.
func TestCallerLeavesCancels(t *testing.T) {
	clearEnv(t)
	started := make(chan struct{})
	d := retrytest.NewDoer().ScriptFunc("openai/m", func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		close(started)
		<-ctx.Done()
		return stream.Result{Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
	})
	ended := make(chan retry.Result, 1)
	h, _ := New(Options{Token: testToken, Engine: eng(d), Events: func(c retry.Call, ev retry.Event) {
		if ev.Kind == retry.EventCallEnd {
			ended <- *ev.Result
		}
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, srv: srv}
	r := e.openAIReq(`{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`).WithContext(ctx)
	go func() {
		<-started
		cancel()
	}()
	if resp, err := e.client().Do(r); err == nil {
		resp.Body.Close()
	}
	select {
	case res := <-ended:
		if res.Outcome != retry.OutcomeCancelled {
			t.Errorf("outcome %s", res.Outcome)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end when its caller left")
	}
}

func TestNewRequiresTokenAndDoer(t *testing.T) {
	if _, err := New(Options{Engine: eng(retrytest.NewDoer())}); err == nil {
		t.Error("no token accepted")
	}
	if _, err := New(Options{Token: "x"}); err == nil {
		t.Error("no doer accepted")
	}
}

func TestInferProvider(t *testing.T) {
	for m, p := range map[string]string{"claude-sonnet-4-5": "anthropic", "gpt-5.4-mini": "openai", "o3": "openai", "o4-mini": "openai",
		"gemini-2.5-flash": "gemini", "grok-4": "xai", "deepseek-chat": "deepseek", "mistral-large-latest": "mistral", "llama-3": "", "omni": ""} {
		if got := inferProvider(m); got != p {
			t.Errorf("%s: %q, want %q", m, got, p)
		}
	}
}

func TestParseConfigBufferedAndReplay(t *testing.T) {
	c, err := ParseConfig([]byte(`{"aliases":{"w":{"chain":["openai/gpt-5.4-mini"],"buffered":true},"l":["openai/gpt-5.4"]},"replay_window":"3s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Aliases["w"].Buffered || c.Aliases["l"].Buffered || c.ReplayWindow == nil || *c.ReplayWindow != 3*time.Second {
		t.Errorf("config %+v", c)
	}
	if c, err = ParseConfig([]byte(`{}`)); err != nil || c.ReplayWindow != nil {
		t.Errorf("empty config: %+v %v", c, err)
	}
}
