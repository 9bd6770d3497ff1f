package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

func simTestApp(t *testing.T, stdout io.Writer) (*app, *bytes.Buffer) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	var stderr bytes.Buffer
	return &app{stdin: strings.NewReader(""), stdout: stdout, stderr: &stderr,
		getenv: func(string) string { return "" }, now: time.Now}, &stderr
}

func TestRunSimList(t *testing.T) {
	var out bytes.Buffer
	a, _ := simTestApp(t, &out)
	if code := runSim(t.Context(), a, []string{"--list"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, s := range sim.Scenarios() {
		if !strings.Contains(out.String(), s.Name) || !strings.Contains(out.String(), s.Description) {
			t.Errorf("--list lacks %s", s.Name)
		}
	}
	if !strings.Contains(out.String(), "rate_limit") {
		t.Error("--list lacks the fault kinds")
	}

	out.Reset()
	if code := runSim(t.Context(), a, []string{"--list", "--json"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Scenarios []sim.ScenarioInfo `json:"scenarios"`
		Faults    []sim.FaultInfo    `json:"faults"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Scenarios) != len(sim.Scenarios()) || len(doc.Faults) == 0 {
		t.Errorf("--list --json: %v %s", err, out.String())
	}
}

func TestRunSimUsage(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--scenario", "nope", "--listen", "127.0.0.1:0"}, {"--scenario-file", "/nonexistent/x.ini", "--listen", "127.0.0.1:0"}} {
		a, stderr := simTestApp(t, io.Discard)
		if code := runSim(t.Context(), a, args); code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
		if stderr.Len() == 0 {
			t.Errorf("%v: nothing on stderr", args)
		}
	}
	a, _ := simTestApp(t, io.Discard)
	if code := runSim(t.Context(), a, []string{"-h"}); code != exitOK {
		t.Errorf("-h: exit %d", code)
	}
}

// `limitscope sim --json` serves until the context ends, as `go run . sim` would.
func TestRunSimServes(t *testing.T) {
	pr, pw := io.Pipe()
	a, stderr := simTestApp(t, pw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runSim(ctx, a, []string{"--listen", "127.0.0.1:0", "--scenario", "daily-quota", "--json"})
		pw.Close()
	}()
	var doc struct {
		URL       string   `json:"url"`
		Scenario  string   `json:"scenario"`
		AdminURL  string   `json:"admin_url"`
		Env       []string `json:"env"`
		Providers []struct {
			Provider, BaseURL string
		} `json:"providers"`
	}
	if err := json.NewDecoder(pr).Decode(&doc); err != nil {
		t.Fatalf("decode: %v (%s)", err, stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if doc.Scenario != "daily-quota" || len(doc.Providers) != len(sim.Providers()) || !strings.HasPrefix(doc.URL, "http://127.0.0.1:") {
		t.Fatalf("doc %+v", doc)
	}
	if !strings.Contains(strings.Join(doc.Env, " "), "OPENAI_BASE_URL="+doc.URL+"/openai/v1") {
		t.Errorf("env %v", doc.Env)
	}
	ep := stream.Endpoint{Provider: "gemini", BaseURL: sim.BaseURL(doc.URL, "gemini"), Key: stream.Secret(sim.FakeKey)}
	res := (&stream.Client{}).Do(ctx, ep, stream.Request{Target: stream.Target{Provider: "gemini", Model: "gemini-2.5-flash"}, Prompt: "hi"}, nil)
	if res.Err != nil || res.Text == "" {
		t.Errorf("gemini via runSim: %v", res.Err)
	}
	st, err := (&sim.Admin{URL: doc.AdminURL}).Status(ctx)
	if err != nil || st.Scenario != "daily-quota" {
		t.Errorf("admin status %+v %v", st, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d (%s)", code, stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("runSim did not return after the context ended")
	}
	if _, err := http.Get(doc.URL + "/_sim/status"); err == nil {
		t.Error("still serving")
	}
}

func TestRunSimBanner(t *testing.T) {
	var out bytes.Buffer
	a, stderr := simTestApp(t, &out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve, print, and stop at once
	if code := runSim(ctx, a, []string{"--listen", "127.0.0.1:0"}); code != exitOK {
		t.Fatalf("exit %d (%s)", code, stderr)
	}
	for _, want := range []string{"/openai/v1", "/anthropic", "/gemini", "/groq/openai/v1", "/deepseek", "/mistral/v1", "/xai/v1",
		"export OPENAI_BASE_URL=", "export OPENAI_API_KEY=" + sim.FakeKey, "export GOOGLE_API_KEY=", "scenario calm"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunSimListenInUse(t *testing.T) {
	r, err := sim.Start(t.Context(), "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, stderr := simTestApp(t, io.Discard)
	if code := runSim(t.Context(), a, []string{"--listen", strings.TrimPrefix(r.URL, "http://")}); code != exitUsage {
		t.Errorf("exit %d, want 2 (%s)", code, stderr)
	}
}

// The seed is printed (a random one by default, a fixed one as given) and
// --answer shapes the answers; a bad shape is a usage error.
func TestRunSimSeedAndAnswer(t *testing.T) {
	var out bytes.Buffer
	a, stderr := simTestApp(t, &out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := runSim(ctx, a, []string{"--listen", "127.0.0.1:0"}); code != exitOK {
		t.Fatalf("exit %d (%s)", code, stderr)
	}
	var seed int64
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "seed "):], "seed %d", &seed); err != nil || seed == 0 {
		t.Errorf("banner names no random seed (%v):\n%s", err, out.String())
	}

	pr, pw := io.Pipe()
	a, stderr = simTestApp(t, pw)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runSim(ctx, a, []string{"--listen", "127.0.0.1:0", "--seed", "42", "--scenario", "bench", "--answer", "paragraph:2KB", "--json"})
		pw.Close()
	}()
	var doc struct {
		URL  string `json:"url"`
		Seed int64  `json:"seed"`
	}
	if err := json.NewDecoder(pr).Decode(&doc); err != nil {
		t.Fatalf("decode: %v (%s)", err, stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if doc.Seed != 42 {
		t.Errorf("seed %d, want 42", doc.Seed)
	}
	ep := stream.Endpoint{Provider: "openai", BaseURL: sim.BaseURL(doc.URL, "openai"), Key: stream.Secret(sim.FakeKey)}
	res := (&stream.Client{}).Do(ctx, ep, stream.Request{Target: stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, Prompt: "hi", MaxTokens: 4000}, nil)
	if res.Err != nil || len(res.Text) != 2048 || strings.Contains(res.Text, "\n") {
		t.Errorf("paragraph:2KB answer of %d bytes (%v)", len(res.Text), res.Err)
	}
	cancel()
	<-done

	a, _ = simTestApp(t, io.Discard)
	if code := runSim(t.Context(), a, []string{"--answer", "sonnet"}); code != exitUsage {
		t.Errorf("--answer sonnet: exit %d, want %d", code, exitUsage)
	}
}
