package calls

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// TestProxiedCallDurableWhenAnswered: the proxy the commands wire commits a
// call's record before its answer ends, so a reader of the file (or a kill
// -9 right after the answer) finds it finished, not "running" or missing.
func TestProxiedCallDurableWhenAnswered(t *testing.T) {
	db := filepath.Join(t.TempDir(), "history.db")
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse([]string{"--sim", "--seed", "7", "--db", db}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := Open(ctx, Env{Getenv: func(string) string { return "" }, Version: "test"}, f, true, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx, 5*time.Second)
	cfg, err := LoadProxyConfig("", f, fs)
	if err != nil {
		t.Fatal(err)
	}
	const token = "proxy-token-for-the-test-0123456789"
	h, err := c.ProxyHandler(token, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i, streamed := range []bool{true, false} {
		body := `{"model":"openai/gpt-5.4-mini","max_tokens":32,"messages":[{"role":"user","content":"hi"}]` +
			map[bool]string{true: `,"stream":true}`, false: `}`}[streamed]
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		// At once, from another handle on the file: the call is there, done.
		calls, err := (&store.Reader{Path: db}).List(ctx, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) != i+1 || calls[0].Outcome != retry.OutcomeOK {
			t.Fatalf("streamed=%v: %d calls in the file when answered (want %d), newest %+v", streamed, len(calls), i+1, calls)
		}
	}
}
