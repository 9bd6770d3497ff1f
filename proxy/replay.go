package proxy

import (
	"crypto/sha256"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// HeaderReplayed marks an answer given from the result of an identical
// request that had just failed for good: its value is that call's id. No
// provider was called for it.
const HeaderReplayed = "X-Limitscope-Replayed"

// DefaultReplayWindow is the longest a final failure answers a caller's
// retry of the same request (shorter when the failure suggested a shorter
// wait).
const DefaultReplayWindow = 10 * time.Second

// maxReplays bounds the failures remembered at once.
const maxReplays = 4096

// replays remembers the final failures of the last few seconds, so that a
// caller retrying one (SDKs that ignore x-should-retry: false, such as the
// Vercel AI SDK, retry a 503 twice more) is answered from it instead of
// spending another call's attempt budget upstream. A request is the same
// when its route, body and client address are.
type replays struct {
	window time.Duration // <= 0: off
	mu     sync.Mutex
	m      map[[sha256.Size]byte]replay
}

// replay is one remembered failure.
type replay struct {
	at, until time.Time
	e         apiError
	d         stream.Dialect
	id        string // the failed call's id
}

func newReplays(window time.Duration) *replays {
	return &replays{window: window, m: map[[sha256.Size]byte]replay{}}
}

func (p *replays) on() bool { return p != nil && p.window > 0 }

// key names a request: the client's address (without its port: a retry
// may come on a new connection), the path and the body.
func replayKey(r *http.Request, body []byte) [sha256.Size]byte {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	s := sha256.New()
	s.Write([]byte(host))
	s.Write([]byte{0})
	s.Write([]byte(r.URL.Path))
	s.Write([]byte{0})
	s.Write(body)
	var k [sha256.Size]byte
	s.Sum(k[:0])
	return k
}

// put remembers a final failure until the earlier of the window's end and
// the wait it suggested.
func (p *replays) put(k [sha256.Size]byte, e *apiError, d stream.Dialect, id string, now time.Time) {
	if !p.on() || e.retryable {
		return
	}
	w := p.window
	if e.retryAfter > 0 && e.retryAfter < w {
		w = e.retryAfter
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= maxReplays {
		for key, v := range p.m {
			if !now.Before(v.until) {
				delete(p.m, key)
			}
		}
		if len(p.m) >= maxReplays {
			return // a flood of distinct failures: each goes upstream as usual
		}
	}
	p.m[k] = replay{at: now, until: now.Add(w), e: *e, d: d, id: id}
}

// get returns the failure that answers k at now, if one does.
func (p *replays) get(k [sha256.Size]byte, now time.Time) (replay, bool) {
	if !p.on() {
		return replay{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	if !ok {
		return replay{}, false
	}
	if !now.Before(v.until) {
		delete(p.m, k)
		return replay{}, false
	}
	return v, true
}

// write answers with the remembered failure: the same status and body,
// retry-after counting down from the original, and HeaderReplayed.
func (v replay) write(w http.ResponseWriter, now time.Time) {
	e := v.e
	if e.retryAfter > 0 {
		e.retryAfter = max(e.retryAfter-now.Sub(v.at), time.Second)
	}
	h := w.Header()
	h.Set(HeaderReplayed, v.id)
	h.Set(HeaderRequestID, v.id)
	h.Set(HeaderAttempts, "0")
	writeError(w, &e, v.d, v.id)
}
