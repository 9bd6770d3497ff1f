package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// canaryKey is a distinctive key: it must never appear in any output, any
// error, any JSON document or any file limitscope writes.
const canaryKey = "sk-test-CANARY7f3a9e-0123456789abcdefXYZ"

// echoProxy stands between limitscope and the simulator as a hostile (or
// merely careless) provider would: it takes the canary key, swaps it for
// the simulator's key so the simulator answers normally, and echoes the
// canary back in a response header, in every error message and in every
// piece of streamed text. With swap false it forwards the canary as is, so
// the simulator answers 401 with the provider's real body.
type echoProxy struct {
	*httptest.Server
	sawKey atomic.Int64 // requests that carried the canary
}

func newEchoProxy(t *testing.T, simURL string, swap bool) *echoProxy {
	t.Helper()
	target, err := url.Parse(simURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &echoProxy{}
	rp := &httputil.ReverseProxy{
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = r.In.URL.Path
			r.Out.URL.RawPath = r.In.URL.RawPath
			r.Out.Host = target.Host
			if !swap {
				return
			}
			for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
				if v := r.Out.Header.Get(h); v != "" {
					r.Out.Header.Set(h, strings.ReplaceAll(v, canaryKey, sim.FakeKey))
				}
			}
			r.Out.URL.RawQuery = strings.ReplaceAll(r.Out.URL.RawQuery, url.QueryEscape(canaryKey), sim.FakeKey)
		},
		ModifyResponse: func(resp *http.Response) error {
			for _, h := range []string{"X-Request-Id", "Request-Id"} {
				resp.Header.Set(h, "req_"+canaryKey)
			}
			resp.Header.Set("X-Echo-Key", canaryKey)
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			resp.Body = &echoBody{rc: resp.Body, br: bufio.NewReader(resp.Body)}
			return nil
		},
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		all := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key") + r.URL.RawQuery
		if strings.Contains(all, canaryKey) {
			p.sawKey.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// env points every provider at the proxy with the canary key.
func (p *echoProxy) env(simRoot func(string) string) map[string]string {
	env := map[string]string{}
	for _, pi := range stream.Providers() {
		env[pi.KeyEnv[0]] = canaryKey
		env[pi.BaseURLEnv] = strings.Replace(simRoot(pi.Name), "SIMROOT", p.URL, 1)
	}
	return env
}

// echoBody rewrites a body line by line (SSE events are lines, and the
// simulator flushes each), putting the canary in every message and text.
type echoBody struct {
	rc  io.ReadCloser
	br  *bufio.Reader
	buf []byte
	err error
}

var echoReplacer = strings.NewReplacer(
	`"message":"`, `"message":"you sent `+canaryKey+` `,
	`"content":"`, `"content":"`+canaryKey+` `,
	`"text":"`, `"text":"`+canaryKey+` `,
	`"request_id":"`, `"request_id":"`+canaryKey,
	`"id":"`, `"id":"`+canaryKey,
	sim.FakeKey, canaryKey,
)

func (b *echoBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		line, err := b.br.ReadString('\n')
		b.buf = []byte(echoReplacer.Replace(line))
		b.err = err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *echoBody) Close() error { return b.rc.Close() }

// TestNoKeyInAnyOutput runs every command over success and failure paths
// with a provider that echoes the key everywhere it can, and scans every
// byte printed and every file written for it.
func TestNoKeyInAnyOutput(t *testing.T) {
	clearEnv(t)
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	simRoot := func(provider string) string {
		return strings.Replace(r.BaseURL(provider), strings.TrimSuffix(r.URL, "/"), "SIMROOT", 1)
	}
	good := newEchoProxy(t, r.URL, true) // swaps the key: the simulator serves
	bad := newEchoProxy(t, r.URL, false) // forwards it: the simulator answers 401
	dir := t.TempDir()
	db := filepath.Join(dir, "state", "history.db")

	var outputs []string
	redactedSeen := false
	runCmd := func(env map[string]string, args ...string) (int, string) {
		t.Helper()
		env["LIMITSCOPE_DB"] = db
		env["XDG_STATE_HOME"] = filepath.Join(dir, "state")
		env["XDG_CONFIG_HOME"] = filepath.Join(dir, "config")
		env["HOME"] = dir
		ta := newTestApp(env)
		ta.app.getenv = func(k string) string { return env[k] }
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		code := run(ctx, ta.app, args)
		all := ta.out.String() + ta.errOut.String()
		outputs = append(outputs, strings.Join(args, " ")+"\n"+all)
		if strings.Contains(all, "[redacted]") {
			redactedSeen = true
		}
		return code, all
	}
	inject := func(f sim.Fault) {
		t.Helper()
		if err := r.Server.Inject(f); err != nil {
			t.Fatal(err)
		}
	}

	goodEnv := func() map[string]string { return good.env(simRoot) }
	// Success, streamed and as JSON, on each dialect.
	for _, m := range []string{"openai/gpt-5.4-mini", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash"} {
		if code, out := runCmd(goodEnv(), "send", "--model", m, "hello"); code != exitOK {
			t.Fatalf("send %s: exit %d\n%s", m, code, out)
		}
		runCmd(goodEnv(), "send", "--json", "--model", m, "hello")
	}
	// The key rejected, the 401 body echoing it.
	if code, out := runCmd(bad.env(simRoot), "send", "--model", "openai/gpt-5.4-mini", "hi"); code != exitFailed {
		t.Errorf("401: exit %d\n%s", code, out)
	}
	runCmd(bad.env(simRoot), "send", "--json", "--model", "anthropic/claude-haiku-4-5", "hi")
	runCmd(bad.env(simRoot), "send", "--json", "--model", "gemini/gemini-2.5-flash", "hi")
	// A rate limit then success; a mid-stream error then a retry.
	inject(sim.Fault{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: time.Millisecond})
	runCmd(goodEnv(), "send", "--model", "openai/gpt-5.4-mini", "hi")
	inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream})
	runCmd(goodEnv(), "send", "--model", "anthropic/claude-haiku-4-5", "hi")
	inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream})
	runCmd(goodEnv(), "send", "--json", "--model", "anthropic/claude-haiku-4-5", "hi")
	// A quota stop: a cooldown is written.
	inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap})
	if code, out := runCmd(goodEnv(), "send", "--model", "openai/gpt-5.4-mini", "hi"); code != exitStopped {
		t.Errorf("quota: exit %d\n%s", code, out)
	}
	inject(sim.Fault{Provider: "gemini", Kind: sim.FaultDailyQuota})
	runCmd(goodEnv(), "send", "--json", "--model", "gemini/gemini-2.5-flash", "hi")

	// A key pasted into a base URL (Gemini's ?key=), served and unreachable.
	env := goodEnv()
	env["GOOGLE_GEMINI_BASE_URL"] += "?key=" + canaryKey
	runCmd(env, "send", "--ignore-cooldown", "--model", "gemini/gemini-2.5-flash", "hi")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	env = goodEnv()
	env["GOOGLE_GEMINI_BASE_URL"] = "http://" + closed + "/v1beta?key=" + canaryKey
	if code, out := runCmd(env, "send", "--ignore-cooldown", "--max-attempts", "1", "--model", "gemini/gemini-2.5-flash", "hi"); code == exitOK || !strings.Contains(out, "key=[redacted]") {
		t.Errorf("unreachable ?key= URL: exit %d\n%s", code, out)
	}
	runCmd(env, "send", "--json", "--ignore-cooldown", "--max-attempts", "1", "--model", "gemini/gemini-2.5-flash", "hi")

	// Everything that reads the history back.
	for _, args := range [][]string{
		{"history", "list"}, {"history", "list", "--json"},
		{"history", "stats"}, {"history", "stats", "--json"},
		{"history", "sessions"}, {"history", "sessions", "--json"},
		{"history", "report", "--since", "1d"},   // the HTML report, on stdout: scanned with the rest
		{"history", "scenario", "--since", "1d"}, // the learnt scenario, on stdout and in a file (walked below)
		{"history", "scenario", "--since", "1d", "--out", filepath.Join(dir, "learnt.ini")},
		{"history", "export"}, {"history", "export", "--format", "csv"},
		{"cooldowns"}, {"cooldowns", "--json"},
		{"info"}, {"info", "--json"},
	} {
		runCmd(goodEnv(), args...)
	}
	for id := 1; id <= 16; id++ {
		runCmd(goodEnv(), "history", "show", strconv.Itoa(id))
		runCmd(goodEnv(), "history", "show", "--json", strconv.Itoa(id))
	}
	// bench on the "real" (proxied) account.
	runCmd(goodEnv(), "bench", "--model", "openai/gpt-5.4-mini", "--requests", "3", "--concurrency", "2", "--json")
	// The simulator command, with the keys in the environment.
	simOut := runSimBriefly(t, goodEnv())
	outputs = append(outputs, "sim\n"+simOut)

	if os.Getenv("H_DUMP") != "" {
		t.Log(strings.Join(outputs, "\n=====\n"))
	}
	if good.sawKey.Load() == 0 || bad.sawKey.Load() == 0 {
		t.Fatalf("the key never reached the providers (%d, %d): the test tests nothing", good.sawKey.Load(), bad.sawKey.Load())
	}
	if !redactedSeen {
		t.Error("no output shows [redacted]: did the echoed key reach limitscope at all?")
	}
	for _, o := range outputs {
		if i := strings.Index(o, canaryKey[8:]); i >= 0 {
			t.Errorf("the key leaked in the output of %s\n...%s...", o[:strings.IndexByte(o, '\n')], o[max(0, i-120):min(len(o), i+60)])
		}
	}
	// Every file under the state and config directories.
	files := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			return nil
		}
		if bytes.Contains(b, []byte(canaryKey[8:])) {
			t.Errorf("the key is in %s", path)
		}
		return nil
	})
	if files == 0 {
		t.Fatal("no history file was written")
	}
	if calls := strings.Count(outputs[len(outputs)-1], "\n"); calls == 0 {
		t.Error("sim printed nothing")
	}
}

// runSimBriefly runs `limitscope sim --json` until it has printed its
// banner, then stops it.
func runSimBriefly(t *testing.T, env map[string]string) string {
	t.Helper()
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: pw, stderr: &errOut, getenv: func(k string) string { return env[k] }, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runSim(ctx, a, []string{"--listen", "127.0.0.1:0", "--json"})
		pw.Close()
	}()
	var doc json.RawMessage
	if err := json.NewDecoder(pr).Decode(&doc); err != nil {
		t.Errorf("sim banner: %v (%s)", err, errOut.String())
	}
	cancel()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	<-done
	return string(doc) + "\n" + errOut.String()
}
