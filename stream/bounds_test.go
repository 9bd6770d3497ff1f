package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"github.com/limitscope/limitscope/internal/sanitize"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gzipMember is one gzip member decoding to n bytes of OpenAI text events
// of 60 KiB each; members concatenated decode as one body.
func gzipMember(t testing.TB, n int) []byte {
	ev := []byte(oaDelta(strings.Repeat("A", 60<<10)))
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	for w := 0; w < n; w += len(ev) {
		if _, err := zw.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const bombChildEnv = "LIMITSCOPE_TEST_GZIP_BOMB_CHILD"

// A gzip bomb (2 GB of text events from a few MB of gzip) ends within
// seconds with a size-limit error and the process stays small: every cap
// counts decoded bytes. The bomb is read in a child process (this test
// binary, re-executed) so its peak RSS can be read from its rusage.
func TestGzipBombStaysSmall(t *testing.T) {
	if os.Getenv(bombChildEnv) != "" {
		t.Skip("in the child")
	}
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGzipBombChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), bombChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil || !strings.Contains(string(out), "bomb ended: ok") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage on this system")
	}
	peak := ru.Maxrss * 1024 // kilobytes on Linux
	t.Logf("child peak RSS %d MiB, %v", peak>>20, took)
	if peak > 300<<20 {
		t.Errorf("peak RSS %d MiB, want under 300 MiB", peak>>20)
	}
	if took > 60*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestGzipBombChild is the child of TestGzipBombStaysSmall.
func TestGzipBombChild(t *testing.T) {
	if os.Getenv(bombChildEnv) == "" {
		t.Skip("run by TestGzipBombStaysSmall")
	}
	member := gzipMember(t, 8<<20) // 8 MiB decoded per member
	const members = 256            // 2 GiB decoded
	c, ep := serve(t, "openai", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(200)
		for range members {
			if _, err := w.Write(member); err != nil {
				return
			}
		}
	})
	// A cap far above the bomb's wire size (about 2 MB): only counting
	// decoded bytes can stop it. Smaller than the 64 MiB default so the
	// test stays quick under -race; with the default it ends in about 3.5 s
	// on a loaded 2-core machine.
	c.Options.MaxStreamSize = 8 << 20
	start := time.Now()
	n := 0
	res := c.Do(context.Background(), ep, Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, func(s string) { n += len(s) })
	took := time.Since(start)
	if res.Err == nil || res.Err.Class != ClassServer || !res.Err.Oversize || !errors.Is(res.Err, errStreamTooBig) {
		t.Fatalf("after %v: %+v", took, res.Err)
	}
	if len(res.Text) > 1<<20 || !res.TextTruncated || n < 4<<20 {
		t.Fatalf("kept %d bytes (truncated %v), streamed %d", len(res.Text), res.TextTruncated, n)
	}
	if took > 30*time.Second {
		t.Fatalf("took %v", took)
	}
	t.Logf("bomb ended: ok after %v, %d bytes streamed", took, n)
}

// One delta, then keep-alive comments and empty chunks forever: the
// connection is alive, the answer is not. The attempt ends as a timeout
// NoProgressTimeout (default 60 s) after the last model output, keeping
// its text. Reasoning deltas are model output: a stream of them for over
// two minutes is fine.
func TestNoProgressTimeout(t *testing.T) {
	steps := []scriptStep{{0, oaText}}
	for i := range 40 {
		ka := ": keep-alive\n\n"
		if i%2 == 1 {
			ka = `data: {"choices":[]}` + "\n\n"
		}
		steps = append(steps, scriptStep{10 * time.Second, ka})
	}
	inBubble(t, "openai", script(200, "text/event-stream", steps...), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || !strings.Contains(res.Err.Message, "no-progress") ||
			took != 60*time.Second || res.Text != "Hi" || !res.Err.MidStream {
			t.Fatalf("after %v: %q %+v", took, res.Text, res.Err)
		}
		c.Options.NoProgressTimeout = 25 * time.Second
		if res, took = timed(c, ep, context.Background()); took != 25*time.Second || res.Class() != ClassTimeout {
			t.Fatalf("25s bound, keep-alives every 10s: after %v: %+v", took, res.Err)
		}
	})
	reasoning := `data: {"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}` + "\n\n"
	rs := []scriptStep{{0, oaText}}
	for range 5 {
		rs = append(rs, scriptStep{25 * time.Second, reasoning})
	}
	rs = append(rs, scriptStep{0, oaFinish + "data: [DONE]\n\n"})
	inBubble(t, "openai", script(200, "text/event-stream", rs...), func(c *Client, ep Endpoint) {
		if res, took := timed(c, ep, context.Background()); res.Err != nil || took != 125*time.Second {
			t.Fatalf("reasoning every 25s: after %v: %+v", took, res.Err)
		}
	})
}

// A stream that stalls and is closed by the server at about the moment the
// stall timer fires ends the same way whichever comes first: a timeout
// (which fails over), not a cut (retried on the same target, which stalls
// again). A close well before the timeout is still a cut.
func TestStallAndCloseEndTheSame(t *testing.T) {
	const stall = 10 * time.Second
	closeAfter := func(d time.Duration) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(oaText))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
			// Returning ends the response: the client sees the end of
			// the body with no end signal.
		}
	}
	for _, d := range []time.Duration{stall - time.Millisecond, stall - raceSlack(stall), stall} {
		for run := range 20 {
			inBubble(t, "openai", closeAfter(d), func(c *Client, ep Endpoint) {
				c.Options.StallTimeout = stall
				res, took := timed(c, ep, context.Background())
				if res.Err == nil || res.Err.Class != ClassTimeout || !strings.Contains(res.Err.Message, "stall") || res.Text != "Hi" || took > stall {
					t.Fatalf("close after %v (run %d): after %v: %+v", d, run, took, res.Err)
				}
			})
		}
	}
	inBubble(t, "openai", closeAfter(stall/2), func(c *Client, ep Endpoint) {
		c.Options.StallTimeout = stall
		if res, _ := timed(c, ep, context.Background()); res.Class() != ClassConnection {
			t.Fatalf("an early close: %+v", res.Err)
		}
	})
	// The same for the no-progress bound: keep-alives, then a close as it
	// runs out.
	kaThenClose := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(oaText))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
			_, _ = w.Write([]byte(": ka\n\n"))
		case <-r.Context().Done():
		}
	}
	for run := range 20 {
		inBubble(t, "openai", kaThenClose, func(c *Client, ep Endpoint) {
			c.Options.NoProgressTimeout = 5 * time.Second
			c.Options.StallTimeout = time.Hour
			if res, _ := timed(c, ep, context.Background()); res.Class() != ClassTimeout || !strings.Contains(res.Err.Message, "no-progress") {
				t.Fatalf("no-progress, run %d: %+v", run, res.Err)
			}
		})
	}
}

// The key split across two deltas, or with ESC, BEL or bidi characters
// inside it, never reaches onText, Result.Text or what a terminal shows:
// redaction sees the text as the user will.
func TestKeyHiddenAsTheUserSeesIt(t *testing.T) {
	half := len(testKey) / 2
	for name, parts := range map[string][]string{
		"split":      {"the key: " + testKey[:half], testKey[half:] + " ok"},
		"split x3":   {testKey[:3], testKey[3:9], testKey[9:] + "."},
		"ESC inside": {"k=" + testKey[:half] + `\u001b[0m` + testKey[half:]},
		"BEL, bidi":  {testKey[:4] + `\u0007` + testKey[4:half] + `\u202e`, testKey[half:]},
		"OSC inside": {testKey[:5] + `\u001b]0;x\u0007`, testKey[5:]},
	} {
		t.Run(name, func(t *testing.T) {
			var body strings.Builder
			for _, p := range parts {
				body.WriteString(oaDelta(p))
			}
			body.WriteString(oaFinish + "data: [DONE]\n\n")
			c, ep := serve(t, "openai", sseHandler([]byte(body.String())))
			res, deltas := doReq(c, ep, "m")
			joined := strings.Join(deltas, "")
			if res.Err != nil || joined != res.Text || !strings.Contains(joined, redacted) {
				t.Fatalf("%q %q %+v", joined, res.Text, res.Err)
			}
			for _, s := range []string{joined, res.Text, sanitize.Text(joined), sanitize.Printable(res.Text)} {
				if strings.Contains(s, testKey) {
					t.Fatalf("the key reached the output: %q", s)
				}
			}
		})
	}
	// Plain text is not held back: each delta comes out as it arrives.
	c, ep := serve(t, "openai", sseHandler([]byte(oaDelta("Hello")+oaDelta(" world")+oaFinish)))
	if _, deltas := doReq(c, ep, "m"); len(deltas) != 2 || deltas[0] != "Hello" {
		t.Fatalf("deltas %q", deltas)
	}
}

// Result.Text keeps at most MaxPartialText bytes (default 1 MiB), cut on a
// rune boundary; onText still gets everything.
func TestMaxPartialText(t *testing.T) {
	var body strings.Builder
	chunk := strings.Repeat("é", 32<<10) // 64 KiB
	for range 48 {                       // 3 MiB
		body.WriteString(oaDelta(chunk))
	}
	body.WriteString(oaFinish + "data: [DONE]\n\n")
	c, ep := serve(t, "openai", sseHandler([]byte(body.String())))
	res, deltas := doReq(c, ep, "m")
	if n := len(strings.Join(deltas, "")); res.Err != nil || n != 48*len(chunk) {
		t.Fatalf("streamed %d: %+v", n, res.Err)
	}
	if len(res.Text) != 1<<20 || !res.TextTruncated || !strings.HasPrefix(res.Text, chunk) {
		t.Fatalf("kept %d bytes, truncated %v", len(res.Text), res.TextTruncated)
	}
	c.Options.MaxPartialText = 5
	if res, _ = doReq(c, ep, "m"); res.Text != "éé" || !res.TextTruncated {
		t.Fatalf("cut at 5 bytes: %q", res.Text)
	}
	c.Options.MaxPartialText = -1
	if res, _ = doReq(c, ep, "m"); len(res.Text) != 48*len(chunk) || res.TextTruncated {
		t.Fatalf("no cap: %d", len(res.Text))
	}
}

// A stream past a size cap is marked Oversize, so the engine does not retry
// it on the same target; other server errors are not.
func TestOversizeFlag(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	c, ep := serve(t, "openai", sseHandler([]byte(oaDelta(big))))
	if res, _ := doReq(c, ep, "m"); res.Err == nil || res.Err.Class != ClassServer || !res.Err.Oversize {
		t.Fatalf("event too large: %+v", res.Err)
	}
	c, ep = serve(t, "openai", errorHandler(500, oaErr("server_error", "", "boom")))
	if res, _ := doReq(c, ep, "m"); res.Err == nil || res.Err.Oversize {
		t.Fatalf("a 500: %+v", res.Err)
	}
}

// Cooldowns from a simulator are scoped to its instance, learnt from the
// header it sends on every response: clients of one running simulator share
// them, a restarted one (a new id) starts clean, a real endpoint keeps the
// plain key.
func TestSimInstanceScope(t *testing.T) {
	quota := func(id string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if id != "" {
				w.Header().Set(SimInstanceHeader, id)
			}
			errorHandler(429, oaErr("insufficient_quota", "insufficient_quota", "no credit"))(w, r)
		}
	}
	fp := Secret(testKey).Fingerprint()
	scopes := func(h http.HandlerFunc) (string, string) {
		c, ep := serve(t, "openai", h)
		r := Router{Client: c, Endpoints: map[string]Endpoint{"openai": ep}}
		if s := r.Scope(Target{Provider: "openai", Model: "m"}, ScopeAccount); s != "account:openai:"+fp {
			t.Fatalf("before any response: %q", s)
		}
		res := r.Do(context.Background(), Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, nil)
		if res.Class() != ClassQuota {
			t.Fatalf("%+v", res.Err)
		}
		return r.Scope(Target{Provider: "openai", Model: "m"}, ScopeAccount), r.Scope(Target{Provider: "openai", Model: "m"}, ScopeTarget)
	}
	a1, t1 := scopes(quota("run-1"))
	a2, _ := scopes(quota("run-1")) // another client of the same simulator
	a3, _ := scopes(quota("run-2")) // the simulator restarted
	real, realT := scopes(quota(""))
	if a1 != "sim:run-1:account:openai:"+fp || t1 != "sim:run-1:target:openai/m" || a2 != a1 {
		t.Fatalf("%q %q %q", a1, t1, a2)
	}
	if a3 == a1 || a3 != "sim:run-2:account:openai:"+fp {
		t.Fatalf("restarted: %q", a3)
	}
	if real != "account:openai:"+fp || realT != "target:openai/m" {
		t.Fatalf("real: %q %q", real, realT)
	}
	if id := instanceID("a:b c/" + strings.Repeat("z", 100)); len(id) != 64 || strings.ContainsAny(id, ": /") {
		t.Fatalf("instance id %q", id)
	}
}
