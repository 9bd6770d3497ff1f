package bench

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// memListener is a net.Listener whose connections are in-memory net.Pipe
// ends: no port, no kernel, and inside a testing/synctest bubble every block
// on it is durable, so virtual time runs while requests stream.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "in-memory" }

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial hands the server one end of a new pipe and returns the other.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = client.Close()
	_ = server.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, net.ErrClosed
}

// InMemory serves h over in-memory connections. It returns an *http.Client
// whose every request, whatever its host, reaches h, and a function that shuts
// the server and the client's connections down and waits for the server to
// stop. It opens no port.
func InMemory(h http.Handler) (*http.Client, func()) {
	l := newMemListener()
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l) // returns http.ErrServerClosed once closed
	}()
	tr := &http.Transport{
		DialContext:         l.dial,
		MaxIdleConnsPerHost: 256,
		ForceAttemptHTTP2:   false,
	}
	hc := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return hc, func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	}
}
