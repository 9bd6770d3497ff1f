package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/tui"
)

// consoleApp is an app whose stdin and stdout count as a terminal.
func consoleApp(errOut io.Writer) *app {
	return &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: errOut, getenv: os.Getenv,
		now: time.Now, stdinTTY: true, stdoutTTY: true}
}

// TestConsoleProxyAddressInUse: --proxy on a port already taken fails before
// the screen starts, exit 2, with a sentence.
func TestConsoleProxyAddressInUse(t *testing.T) {
	clearEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	errOut := &lockedBuffer{}
	started := false
	code := runConsole(context.Background(), consoleApp(errOut), []string{"--sim", "--proxy", busy.Addr().String()},
		func(context.Context, tui.Options) error { started = true; return nil })
	if code != exitUsage || started {
		t.Fatalf("exit %d, screen started %v: %s", code, started, errOut)
	}
	if s := errOut.String(); !strings.Contains(s, "--proxy") || !strings.Contains(s, "address already in use") {
		t.Errorf("stderr: %s", s)
	}
	// --proxy-config alone is a usage error.
	code = runConsole(context.Background(), consoleApp(errOut), []string{"--sim", "--proxy-config", "x.json"},
		func(context.Context, tui.Options) error { started = true; return nil })
	if code != exitUsage || started {
		t.Errorf("--proxy-config without --proxy: exit %d, started %v", code, started)
	}
}

// screenTap keeps the console's latest frame, read by a program filter on
// the program's own goroutine.
type screenTap struct {
	mu     sync.Mutex
	screen string
}

func (s *screenTap) filter(m tea.Model, msg tea.Msg) tea.Msg {
	frame := ansi.Strip(m.View().Content)
	s.mu.Lock()
	s.screen = frame
	s.mu.Unlock()
	return msg
}

func (s *screenTap) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.screen
}

// TestConsoleProxyEndToEnd runs the console's wiring (runConsole) with
// --sim --proxy on a free port, its real screen model driven through a pipe:
// an OpenAI-format streaming request with the proxy's token is answered by
// the in-process simulator, the console shows the call as the proxy's, the
// session counts it, and the history has it. The token is never printed.
func TestConsoleProxyEndToEnd(t *testing.T) {
	t.Parallel()
	cfgHome := t.TempDir()
	env := isolatedEnv(t, map[string]string{"XDG_CONFIG_HOME": cfgHome})
	errOut := &lockedBuffer{}
	a := consoleApp(errOut)
	a.getenv = getenvOf(env)
	tap := &screenTap{}
	pr, pw := io.Pipe()
	defer pw.Close()
	optsCh := make(chan tui.Options, 1)
	ui := func(ctx context.Context, opts tui.Options) error {
		optsCh <- opts
		return tui.RunWith(ctx, opts, tea.WithInput(pr), tea.WithOutput(io.Discard),
			tea.WithWindowSize(120, 40), tea.WithFilter(tap.filter))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- runConsole(ctx, a, []string{"--sim", "--proxy", "127.0.0.1:0"}, ui) }()

	var opts tui.Options
	select {
	case opts = <-optsCh:
	case c := <-code:
		t.Fatalf("exited %d before the screen: %s", c, errOut)
	case <-time.After(10 * time.Second):
		t.Fatal("the screen never started")
	}
	if opts.Inbox == nil || opts.ProxyAddr == "" {
		t.Fatalf("the console was not given the proxy: inbox %v addr %q", opts.Inbox, opts.ProxyAddr)
	}
	tok, err := os.ReadFile(proxy.TokenPath(filepath.Join(cfgHome, "limitscope")))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))

	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	post := func(key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+opts.ProxyAddr+"/v1/chat/completions",
			strings.NewReader(`{"model":"openai/gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"Say hi through the proxy"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("User-Agent", "curl/8.5.0")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	if resp, _ := post("not-the-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token got %d", resp.StatusCode)
	}
	resp, body := post(token)
	if resp.StatusCode != 200 || resp.Header.Get(proxy.HeaderServedBy) != "openai/gpt-5.4-mini" || !strings.Contains(body, "[DONE]") {
		t.Fatalf("status %d served by %q: %s", resp.StatusCode, resp.Header.Get(proxy.HeaderServedBy), body)
	}

	// Keys make the program render; the tap sees each frame.
	var screen string
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := pw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		screen = tap.get()
		if strings.Contains(screen, "calls 1 (1 proxied)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxied call never showed; last frame:\n%s", screen)
		}
		time.Sleep(20 * time.Millisecond) // polling the screen, not waiting to pass
	}
	for _, want := range []string{"PROXY http://" + opts.ProxyAddr, "via proxy · client curl/8.5.0 · model openai/gpt-5.4-mini",
		"> Say hi through the proxy", "served by openai/gpt-5.4-mini", "SIMULATED"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, token) {
		t.Error("the token is on the screen")
	}

	if _, err := pw.Write([]byte{3}); err != nil { // ctrl+c, idle: quit
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d: %s", c, errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the console did not quit")
	}
	if strings.Contains(errOut.String(), token) {
		t.Error("the token was printed")
	}
	rd := &store.Reader{Path: env["LIMITSCOPE_DB"]}
	calls, err := rd.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Outcome != "ok" {
		t.Fatalf("history: %+v", calls)
	}
	c, err := rd.Show(context.Background(), fmt.Sprint(calls[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if c.Prompt != "Say hi through the proxy" || c.Route != "openai/gpt-5.4-mini" || c.Client != "curl/8.5.0" {
		t.Errorf("history call: prompt %q route %q client %q", c.Prompt, c.Route, c.Client)
	}
}
