package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultListen is where the proxy listens unless told otherwise.
const DefaultListen = "127.0.0.1:4000"

// IsLoopback reports whether addr ("host:port") listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen opens addr for the proxy.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" {
		addr = DefaultListen
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeOptions configure the proxy's HTTP server; zero fields take the
// defaults.
type ServeOptions struct {
	// Grace is how long calls in flight may finish after ctx ends, before
	// their connections are closed (0: none).
	Grace time.Duration
	// HeaderTimeout bounds reading a request's headers (DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection left idle that long
	// (DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// Serve serves h on ln until ctx ends, then stops taking requests and gives
// calls in flight up to grace to finish before closing them. It is
// ServeWith with the default timeouts.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	return ServeWith(ctx, ln, h, ServeOptions{Grace: grace})
}

// ServeWith serves h on ln until ctx ends, like Serve, with o's timeouts.
// The body-read timeout and the caps are the Handler's (Options).
func ServeWith(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: o.HeaderTimeout, IdleTimeout: o.IdleTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("proxy: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("proxy: %w", err)
	}
	return nil
}
