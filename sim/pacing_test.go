package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// slowFlush is a response whose every flush takes cost (of the bubble's
// virtual time), as a write and flush to a loopback socket on a busy
// machine takes real time.
type slowFlush struct {
	*httptest.ResponseRecorder
	cost    time.Duration
	flushes int
	stallAt int           // the flush (counted from 1) that blocks for stall (0: none)
	stall   time.Duration // a client not reading for a while
}

func (w *slowFlush) Flush() {
	time.Sleep(w.cost)
	w.flushes++
	if w.flushes == w.stallAt {
		time.Sleep(w.stall)
	}
	w.ResponseRecorder.Flush()
}

// streamTimed streams one long OpenAI answer at tps tokens a second to a
// w (its flushes' costs set), in a synctest bubble, and returns
// the answer's size in bytes, the time from the first text to the end, and
// the number of flushes.
func streamTimed(t *testing.T, tps float64, w *slowFlush) (bytesOut int, took time.Duration, flushes int) {
	t.Helper()
	clearEnv(t)
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{TokensPerSecond: tps, Answer: "paragraph:32KB", Seed: 1,
			ScenarioFile: scenarioFile(t, "name = fast\n[*]\ntpm = 0\nrpm = 0\n")})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		b, _ := json.Marshal(map[string]any{"model": "gpt-5.4-mini", "max_tokens": 100000, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": "go"}}})
		req := httptest.NewRequest(http.MethodPost, BaseURL("http://sim.test", "openai")+"/chat/completions", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+FakeKey)
		req.Header.Set("Content-Type", "application/json")
		w.ResponseRecorder = httptest.NewRecorder()
		start := time.Now()
		s.ServeHTTP(w, req)
		took = time.Since(start)
		if w.Code != 200 || !strings.Contains(w.Body.String(), "[DONE]") {
			t.Fatalf("HTTP %d: %.300s", w.Code, w.Body.String())
		}
		for _, line := range strings.Split(w.Body.String(), "\n") {
			var c struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 {
				bytesOut += len(c.Choices[0].Delta.Content)
			}
		}
		flushes = w.flushes
	})
	return bytesOut, took, flushes
}

// The simulator delivers the rate asked for, whatever each write and flush
// costs: a piece is due by the tokens before it, not by the sleeps so far,
// and pieces due within a flush tick share one flush. (It slept the owed
// time on top of every write and flush, and dropped each timer's
// overshoot: 5,000 asked gave about 3,500.)
func TestPacedDeliversTheAskedRate(t *testing.T) {
	for _, tc := range []struct {
		tps       float64
		flushCost time.Duration
	}{
		{5000, 100 * time.Microsecond}, // faster than one flush a piece can carry on a busy machine
		{200, time.Millisecond},
	} {
		n, took, flushes := streamTimed(t, tc.tps, &slowFlush{cost: tc.flushCost})
		want := time.Duration(float64(n) / 4 / tc.tps * float64(time.Second))
		if took < want*98/100 || took > want*102/100 {
			t.Errorf("%.0f tokens/s asked, flushes costing %v: %d bytes in %v, want %v (%.0f tokens/s delivered)",
				tc.tps, tc.flushCost, n, took, want, float64(n)/4/took.Seconds())
		}
		pieces := float64(n) / 6 // about six bytes a word
		if tc.tps == 5000 && float64(flushes) > 2*took.Seconds()/0.004+10 {
			t.Errorf("%d flushes for about %.0f pieces in %v: not coalesced", flushes, pieces, took)
		}
		if tc.tps == 200 && float64(flushes) < pieces*0.9 {
			t.Errorf("%d flushes for about %.0f pieces at 200 tokens/s: words held back", flushes, pieces)
		}
	}
}

// A client that stops reading for a while gets the pieces it missed only up
// to maxLag at once: after a 2 s stall the stream resumes at the pace, 250 ms
// ahead of where the stall left it, not in a 2 s burst.
func TestPacedBoundsTheCatchUp(t *testing.T) {
	n, took, _ := streamTimed(t, 5000, &slowFlush{stallAt: 50, stall: 2 * time.Second})
	want := time.Duration(float64(n)/4/5000*float64(time.Second)) + 2*time.Second - maxLag
	if took < want-20*time.Millisecond || took > want+20*time.Millisecond {
		t.Errorf("%d bytes in %v after a 2 s stall, want %v", n, took, want)
	}
}
