package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// oaDelta is one OpenAI text event.
func oaDelta(s string) string {
	return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
}

// The stall timeout fires exactly StallTimeout after the last sign of life,
// whatever the interleaving of bytes arriving, the caller's onText taking
// its time (shorter or longer than the timeout) and the timer firing: bytes
// at random gaps, some arriving while onText runs, then silence. Run over
// many seeds in a synctest bubble, so every interleaving the scheduler
// picks is checked against the exact expected time.
func TestStallTimeoutExactUnderAnyInterleaving(t *testing.T) {
	const stall = 10 * time.Second
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(12)
		gaps := make([]time.Duration, n)
		holds := make([]time.Duration, n)
		for i := range n {
			gaps[i] = time.Duration(rng.IntN(int(stall/time.Millisecond)-1)+1) * time.Millisecond // < stall
			if rng.IntN(3) == 0 {
				holds[i] = time.Duration(rng.IntN(int(3*stall/time.Millisecond))) * time.Millisecond // may pass the timeout
			}
		}
		var mu sync.Mutex
		var lastWrite time.Time
		h := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for i := range n {
				select {
				case <-time.After(gaps[i]):
				case <-r.Context().Done():
					return
				}
				if _, err := w.Write([]byte(oaDelta(fmt.Sprint(i)))); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				mu.Lock()
				lastWrite = time.Now()
				mu.Unlock()
			}
			<-r.Context().Done()
		}
		inBubble(t, "openai", h, func(c *Client, ep Endpoint) {
			c.Options = Options{StallTimeout: stall, FirstTokenTimeout: time.Hour}
			start := time.Now()
			var lastHoldEnd time.Time
			i := 0
			res := c.Do(context.Background(), ep, Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, func(string) {
				time.Sleep(holds[i])
				lastHoldEnd = time.Now()
				i++
			})
			end := time.Now()
			mu.Lock()
			lastLife := lastWrite
			mu.Unlock()
			if lastHoldEnd.After(lastLife) {
				lastLife = lastHoldEnd
			}
			if res.Err == nil || res.Err.Class != ClassTimeout || !strings.Contains(res.Err.Message, "stall") {
				t.Fatalf("seed %d: %+v", seed, res.Err)
			}
			if want := lastLife.Add(stall); !end.Equal(want) {
				t.Fatalf("seed %d (gaps %v, holds %v): timed out %v after the start, want %v (last sign of life at %v)",
					seed, gaps, holds, end.Sub(start), want.Sub(start), lastLife.Sub(start))
			}
		})
	}
}

// The flake this guards against was seen under load: a stream that sent
// some text and then went silent waited out the caller's context instead
// of its 100 ms stall timeout. Many such streams at once on real sockets
// and the real clock: every one must end in a stall timeout, promptly.
func TestStallTimeoutUnderLoad(t *testing.T) {
	clearEnv(t)
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, s := range []string{"Bucket", " token"} {
			_, _ = w.Write([]byte(oaDelta(s)))
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
	c, ep := serve(t, "openai", h)
	c.Options = Options{HeaderTimeout: 5 * time.Second, StallTimeout: 100 * time.Millisecond, FirstTokenTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			res := c.Do(ctx, ep, Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, func(string) {
				if i%4 == 0 {
					time.Sleep(150 * time.Millisecond) // a slow consumer, longer than the timeout
				}
			})
			if took := time.Since(start); res.Err == nil || res.Err.Class != ClassTimeout || res.Text != "Bucket token" || took > 3*time.Second {
				t.Errorf("stream %d: after %v: %q %+v", i, took, res.Text, res.Err)
			}
		}()
	}
	wg.Wait()
}

// Bytes and the end of a slow onText landing on the very instant the stall
// timer fires: whichever the scheduler runs first, the attempt ends in a
// stall timeout no later than StallTimeout after the last sign of life,
// never waiting for the caller's context (here an hour).
func TestStallTimeoutAtExactBoundaries(t *testing.T) {
	const stall = 10 * time.Second
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 9))
		n := 1 + rng.IntN(6)
		gaps := make([]time.Duration, n)
		holds := make([]time.Duration, n)
		for i := range n {
			gaps[i] = []time.Duration{stall, stall - 1, 1, stall / 2}[rng.IntN(4)]
			holds[i] = []time.Duration{0, stall, stall / 2, 0}[rng.IntN(4)]
		}
		var mu sync.Mutex
		var lastWrite time.Time
		h := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for i := range n {
				select {
				case <-time.After(gaps[i]):
				case <-r.Context().Done():
					return
				}
				if _, err := w.Write([]byte(oaDelta(fmt.Sprint(i)))); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				mu.Lock()
				lastWrite = time.Now()
				mu.Unlock()
			}
			<-r.Context().Done()
		}
		inBubble(t, "openai", h, func(c *Client, ep Endpoint) {
			c.Options = Options{StallTimeout: stall, FirstTokenTimeout: time.Hour}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			start := time.Now() // the headers come at once: the timer starts here
			var lastHoldEnd time.Time
			i := 0
			res := c.Do(ctx, ep, Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, func(string) {
				time.Sleep(holds[i])
				lastHoldEnd = time.Now()
				i++
			})
			end := time.Now()
			mu.Lock()
			lastLife := lastWrite
			mu.Unlock()
			for _, t := range []time.Time{start, lastHoldEnd} {
				if t.After(lastLife) {
					lastLife = t
				}
			}
			if res.Err == nil || res.Err.Class != ClassTimeout || end.After(lastLife.Add(stall)) {
				t.Errorf("seed %d gaps %v holds %v: %v after last life: %+v", seed, gaps, holds, end.Sub(lastLife), res.Err)
			}
		})
	}
}
