package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/store"
)

// lockedBuffer is a goroutine-safe stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProxyCommandOnSimulator(t *testing.T) {
	t.Parallel()
	cfgHome := t.TempDir()
	env := isolatedEnv(t, map[string]string{"XDG_CONFIG_HOME": cfgHome})
	cfg := filepath.Join(t.TempDir(), "proxy.json")
	if err := os.WriteFile(cfg, []byte(`{"aliases":{"fast":["openai/gpt-5.4-mini","anthropic/claude-haiku-5-5"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut := &lockedBuffer{}
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: errOut, getenv: getenvOf(env), now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- runProxy(ctx, a, []string{"--listen", "127.0.0.1:0", "--sim", "--config", cfg}) }()

	addrRE := regexp.MustCompile(`listening on http://(\S+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); {
		if m := addrRE.FindStringSubmatch(errOut.String()); m != nil {
			addr = m[1]
		} else {
			select {
			case c := <-code:
				t.Fatalf("exited %d: %s", c, errOut.String())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if addr == "" {
		t.Fatalf("never listened: %s", errOut.String())
	}
	tokPath := proxy.TokenPath(filepath.Join(cfgHome, "limitscope"))
	tok, err := os.ReadFile(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "curl/8.5.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(proxy.HeaderServedBy) != "openai/gpt-5.4-mini" {
		t.Errorf("status %d served by %q: %s", resp.StatusCode, resp.Header.Get(proxy.HeaderServedBy), body)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	out := errOut.String()
	if strings.Contains(out, token) {
		t.Error("the token was printed")
	}
	if !strings.Contains(out, "OPENAI_BASE_URL=http://"+addr+"/v1") || !strings.Contains(out, `model="fast"`) || !strings.Contains(out, `client="curl/8.5.0"`) {
		t.Errorf("stderr: %s", out)
	}
	calls, err := (&store.Reader{Path: env["LIMITSCOPE_DB"]}).List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Outcome != "ok" {
		t.Errorf("history: %+v", calls)
	}
}

func TestProxyCommandNeedsAKey(t *testing.T) {
	clearEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ta := newTestApp(nil)
	if c := runProxy(context.Background(), ta.app, []string{"--listen", "127.0.0.1:0"}); c != exitUsage {
		t.Errorf("exit %d", c)
	}
	if !strings.Contains(ta.errOut.String(), "--sim") {
		t.Errorf("stderr: %s", ta.errOut.String())
	}
	ta = newTestApp(nil)
	if c := runProxy(context.Background(), ta.app, []string{"--sim", "--config", "/nonexistent.json"}); c != exitUsage {
		t.Errorf("bad config: exit %d", c)
	}
}
