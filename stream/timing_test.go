package stream

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands the server ends of in-memory net.Pipe connections to
// an http.Server, so client and server both live inside a synctest bubble
// and the fake clock advances whenever both sides wait.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// inBubble runs f in a synctest bubble with a Client talking to h over
// in-memory pipes, and shuts both down before the bubble ends.
func inBubble(t *testing.T, provider string, h http.HandlerFunc, f func(c *Client, ep Endpoint)) {
	t.Helper()
	clearEnv(t)
	synctest.Test(t, func(t *testing.T) {
		l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Reading the request body to its end lets the server notice
			// the client going away (it cancels r.Context()).
			_, _ = io.Copy(io.Discard, r.Body)
			h(w, r)
		})}
		go func() { _ = srv.Serve(l) }()
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, s := net.Pipe()
			select {
			case l.conns <- s:
				return c, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-l.done:
				return nil, net.ErrClosed
			}
		}}
		hc := &http.Client{Transport: tr}
		defer func() {
			tr.CloseIdleConnections()
			_ = srv.Close()
			synctest.Wait()
		}()
		f(&Client{HTTP: hc}, Endpoint{Provider: provider, BaseURL: "http://sim.test/v1", Key: testKey})
	})
}

// script is a handler that writes its steps in order, sleeping on the fake
// clock between them, and then holds the connection open until the client
// goes away.
type scriptStep struct {
	wait time.Duration
	data string
}

func script(status int, ct string, steps ...scriptStep) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		w.(http.Flusher).Flush()
		for _, s := range steps {
			select {
			case <-time.After(s.wait):
			case <-r.Context().Done():
				return
			}
			if _, err := w.Write([]byte(s.data)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

func timed(c *Client, ep Endpoint, ctx context.Context) (Result, time.Duration) {
	start := time.Now()
	res := c.Do(ctx, ep, Request{Target: Target{Provider: ep.Provider, Model: "m"}, Prompt: "hi"}, nil)
	return res, time.Since(start)
}

func TestHeaderTimeout(t *testing.T) {
	never := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	inBubble(t, "openai", never, func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || res.Status != 0 || took != 30*time.Second ||
			!strings.Contains(res.Err.Message, "header timeout") {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
		c.Options.HeaderTimeout = 5 * time.Second
		if res, took = timed(c, ep, context.Background()); took != 5*time.Second || res.Err.Class != ClassTimeout {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestFirstTokenTimeoutDespiteKeepAlives(t *testing.T) {
	var steps []scriptStep
	for range 20 {
		steps = append(steps, scriptStep{10 * time.Second, ": keep-alive\n\n"})
	}
	inBubble(t, "openai", script(200, "text/event-stream", steps...), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || res.Status != 200 || took != 60*time.Second ||
			!strings.Contains(res.Err.Message, "first-token") {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
	// Anthropic: message_start and pings are not content.
	ant := []scriptStep{{0, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\"}}\n\n"}}
	for range 20 {
		ant = append(ant, scriptStep{5 * time.Second, "event: ping\ndata: {\"type\": \"ping\"}\n\n"})
	}
	inBubble(t, "anthropic", script(200, "text/event-stream", ant...), func(c *Client, ep Endpoint) {
		c.Options.FirstTokenTimeout = 12 * time.Second
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || took != 12*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestStallTimeout(t *testing.T) {
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{time.Second, oaText}), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || !res.Err.MidStream || res.Text != "Hi" ||
			took != 31*time.Second || !strings.Contains(res.Err.Message, "stall") {
			t.Fatalf("after %v: %q %+v", took, res.Text, res.Err)
		}
		if res.TTFT != time.Second {
			t.Errorf("TTFT %v", res.TTFT)
		}
	})
	// An error body that stalls is a timeout too, not a hang.
	inBubble(t, "openai", script(429, "application/json", scriptStep{0, `{"error":`}), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Status != 429 || took != 30*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestKeepAlivesCountAsLive(t *testing.T) {
	// Text, then 100 s of keep-alive comments 20 s apart (each silence
	// shorter than the 30 s stall timeout), then the end.
	steps := []scriptStep{{0, oaText}}
	for range 5 {
		steps = append(steps, scriptStep{20 * time.Second, ": keep-alive\n\n"})
	}
	steps = append(steps, scriptStep{0, oaFinish + oaUsage + "data: [DONE]\n\n"})
	inBubble(t, "openai", script(200, "text/event-stream", steps...), func(c *Client, ep Endpoint) {
		// Keep-alives are not model output: only the stall timer is under
		// test here, so the no-progress bound (60 s) is set out of the way.
		c.Options.NoProgressTimeout = time.Hour
		res, took := timed(c, ep, context.Background())
		if res.Err != nil || took != 100*time.Second || res.Usage == nil {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestTrickle(t *testing.T) {
	body := oaText + oaFinish + "data: [DONE]\n\n"
	var steps []scriptStep
	for i := range body {
		steps = append(steps, scriptStep{time.Second, body[i : i+1]})
	}
	inBubble(t, "openai", script(200, "text/event-stream", steps...), func(c *Client, ep Endpoint) {
		// One byte a second never stalls, but the first content is late.
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || took != 60*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
		c.Options.FirstTokenTimeout = time.Hour
		c.Options.NoProgressTimeout = time.Hour // the finish chunk trickles for over a minute
		res, took = timed(c, ep, context.Background())
		// It ends 2 s (the usage grace) after finish_reason; [DONE] is further away.
		if res.Err != nil || res.Text != "Hi" || took != time.Duration(len(oaText)+len(oaFinish)+2)*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestUsageGrace(t *testing.T) {
	// finish_reason, then silence with the connection open: complete after
	// the grace, without usage.
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{0, oaText + oaFinish}), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err != nil || took != 2*time.Second || res.Usage != nil || res.FinishReason != "stop" {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
	// The usage chunk 1.5 s after finish_reason is caught; [DONE] ends it.
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{0, oaText + oaFinish}, scriptStep{1500 * time.Millisecond, oaUsage}, scriptStep{100 * time.Millisecond, "data: [DONE]\n\n"}),
		func(c *Client, ep Endpoint) {
			res, took := timed(c, ep, context.Background())
			if res.Err != nil || took != 1600*time.Millisecond || res.Usage == nil || res.Usage.OutputTokens != 2 {
				t.Fatalf("after %v: %+v %+v", took, res.Err, res.Usage)
			}
		})
	// One that comes after the grace is not waited for.
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{0, oaText + oaFinish}, scriptStep{3 * time.Second, oaUsage}),
		func(c *Client, ep Endpoint) {
			res, took := timed(c, ep, context.Background())
			if res.Err != nil || took != 2*time.Second || res.Usage != nil {
				t.Fatalf("after %v: %+v", took, res.Err)
			}
		})
	// Gemini: finishReason is the end; EOF normally follows at once.
	inBubble(t, "gemini", script(200, "text/event-stream", scriptStep{0, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]},\"finishReason\":\"STOP\"}]}\n\n"}),
		func(c *Client, ep Endpoint) {
			c.Options.UsageGrace = 500 * time.Millisecond
			res, took := timed(c, ep, context.Background())
			if res.Err != nil || took != 500*time.Millisecond || res.Text != "x" {
				t.Fatalf("after %v: %+v", took, res.Err)
			}
		})
}

func TestTTFT(t *testing.T) {
	inBubble(t, "anthropic", script(200, "text/event-stream",
		scriptStep{time.Second, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\"}}\n\n"},
		scriptStep{2 * time.Second, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"A\"}}\n\n"},
		scriptStep{time.Second, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"}),
		func(c *Client, ep Endpoint) {
			res, took := timed(c, ep, context.Background())
			if res.Err != nil || res.TTFT != 3*time.Second || took != 4*time.Second {
				t.Fatalf("ttft %v after %v: %+v", res.TTFT, took, res.Err)
			}
		})
}

func TestCancellation(t *testing.T) {
	// Mid-stream: ends at once, partial text kept.
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{0, oaText}), func(c *Client, ep Endpoint) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(5*time.Second, cancel)
		res, took := timed(c, ep, ctx)
		if res.Err == nil || res.Err.Class != ClassCancelled || took != 5*time.Second || res.Text != "Hi" || !res.Err.MidStream {
			t.Fatalf("after %v: %q %+v", took, res.Text, res.Err)
		}
	})
	// Waiting for headers.
	never := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	inBubble(t, "gemini", never, func(c *Client, ep Endpoint) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(2*time.Second, cancel)
		res, took := timed(c, ep, ctx)
		if res.Err == nil || res.Err.Class != ClassCancelled || took != 2*time.Second || res.Status != 0 {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
	// The slow onText of a caller is not silence on the wire.
	inBubble(t, "openai", script(200, "text/event-stream", scriptStep{0, oaText}, scriptStep{0, oaFinish + "data: [DONE]\n\n"}), func(c *Client, ep Endpoint) {
		res := c.Do(context.Background(), ep, Request{Target: Target{Provider: "openai", Model: "m"}}, func(string) { time.Sleep(45 * time.Second) })
		if res.Err != nil {
			t.Fatalf("%+v", res.Err)
		}
	})
}

func TestGzipHeaderStall(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(200)
		_, _ = w.Write([]byte{0x1f}) // half a gzip magic number, then silence
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	inBubble(t, "openai", h, func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || took != 30*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}

func TestEventStreamThatNeverSendsData(t *testing.T) {
	inBubble(t, "anthropic", script(200, "text/event-stream"), func(c *Client, ep Endpoint) {
		res, took := timed(c, ep, context.Background())
		if res.Err == nil || res.Err.Class != ClassTimeout || res.Status != 200 || res.Err.MidStream || took != 30*time.Second {
			t.Fatalf("after %v: %+v", took, res.Err)
		}
	})
}
