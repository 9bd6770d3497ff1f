package stream

import (
	"context"
	"net/http"
	"time"
)

// Options bound what one attempt may read and how long it may wait.
type Options struct {
	HeaderTimeout     time.Duration // to the response headers (default 30s)
	FirstTokenTimeout time.Duration // to the first content (default 60s)
	StallTimeout      time.Duration // of silence on the wire, measured on raw bytes (default 30s)
	MaxEventSize      int           // largest SSE event accepted (default 1 MiB)
	MaxBodySize       int64         // largest error or non-stream body read (default 1 MiB)
	UsageGrace        time.Duration // after an OpenAI-style finish_reason, wait this long for usage and [DONE] (default 2s)
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		HeaderTimeout:     30 * time.Second,
		FirstTokenTimeout: 60 * time.Second,
		StallTimeout:      30 * time.Second,
		MaxEventSize:      1 << 20,
		MaxBodySize:       1 << 20,
		UsageGrace:        2 * time.Second,
	}
}

// Client sends one attempt to one endpoint. It never retries.
type Client struct {
	HTTP    *http.Client     // nil: a client with no overall timeout that follows no redirect carrying credentials across hosts
	Options Options          // zero fields take DefaultOptions
	Now     func() time.Time // nil: time.Now
}

// Do sends req to ep and reads the answer to its end, calling onText (which
// may be nil) with each text delta as it arrives. It returns the Result;
// Result.Err is nil only when the stream signalled its own end.
func (c *Client) Do(ctx context.Context, ep Endpoint, req Request, onText func(string)) Result {
	return Result{Err: &Error{Class: ClassConnection, Message: "not implemented"}}
}
