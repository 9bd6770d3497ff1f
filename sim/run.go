package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// accountName is the simulated provider an API variant of the provider
// table ("openai:responses") belongs to: its base URL, limits and faults
// are that provider's. Any other name is returned as it is.
func accountName(provider string) string {
	if info, ok := stream.Provider(provider); ok && info.Account != "" {
		return info.Account
	}
	return provider
}

// BaseURL returns the value of a provider's *_BASE_URL for a simulator
// served at root (e.g. "http://127.0.0.1:8787"); "" for an unknown provider.
func BaseURL(root, provider string) string {
	p := providerOf(accountName(provider))
	if p == nil {
		return ""
	}
	return strings.TrimSuffix(root, "/") + p.prefix
}

// Providers lists the simulated providers in display order.
func Providers() []string {
	out := make([]string, len(providerNames))
	copy(out, providerNames)
	return out
}

// Running is a simulator serving on a loopback listener.
type Running struct {
	Server *Server
	URL    string // http://127.0.0.1:PORT

	srv    *http.Server
	served chan error
	stop   chan struct{}
	once   sync.Once
	err    error
}

// Start listens on addr ("" => 127.0.0.1:0, a free loopback port) and serves
// a new simulator until ctx ends or Close is called.
func Start(ctx context.Context, addr string, opts Options) (*Running, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	r := &Running{
		Server: s,
		URL:    "http://" + ln.Addr().String(),
		srv:    &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, Protocols: serveProtocols()},
		served: make(chan error, 1),
		stop:   make(chan struct{}),
	}
	go func() { r.served <- r.srv.Serve(ln) }()
	go func() {
		select {
		case <-ctx.Done():
			_ = r.Close()
		case <-r.stop:
		}
	}()
	return r, nil
}

// serveProtocols is HTTP/1.1 and HTTP/2 without TLS (prior knowledge) on
// one listener: the AWS SDK for JavaScript speaks HTTP/2 to an http://
// Bedrock endpoint, every other client HTTP/1.1.
func serveProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// BaseURL returns the value for the provider's *_BASE_URL.
func (r *Running) BaseURL(provider string) string { return BaseURL(r.URL, provider) }

// Endpoint returns the stream.Endpoint of a provider on this simulator,
// with the fake key.
func (r *Running) Endpoint(provider string) stream.Endpoint {
	return stream.Endpoint{Provider: provider, BaseURL: r.BaseURL(provider), Key: stream.Secret(FakeKey)}
}

// Env returns "NAME=value" lines that point every provider at this
// simulator: each base-URL variable and each key variable (the fake key).
func (r *Running) Env() []string {
	var out []string
	for _, p := range providerNames {
		info, ok := stream.Provider(p)
		if !ok {
			continue
		}
		out = append(out, info.BaseURLEnv+"="+r.BaseURL(p))
		if info.SigV4Service != "" {
			// The AWS SDKs refuse a Bedrock API key over plain HTTP (Go) or
			// need it over HTTPS: they sign with the simulated credentials.
			out = append(out, AWSEnv()...)
			continue
		}
		for _, k := range info.KeyEnv[:1] {
			out = append(out, k+"="+FakeKey)
		}
	}
	return out
}

// AWSEnv is the environment that points an AWS SDK's credential chain at
// the simulated credentials: "NAME=value" lines for the access key id, the
// secret and the Region (SigV4; none of them is a secret).
func AWSEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + FakeAWSAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + FakeAWSSecretAccessKey, "AWS_REGION=" + FakeAWSRegion}
}

// Close stops serving at once: open streams and hung requests are dropped.
// It waits for the server goroutine and is safe to call more than once.
func (r *Running) Close() error {
	r.once.Do(func() {
		close(r.stop)
		r.Server.Close()
		err := r.srv.Close()
		if serr := <-r.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			r.err = fmt.Errorf("sim: close: %w", err)
		}
	})
	return r.err
}
