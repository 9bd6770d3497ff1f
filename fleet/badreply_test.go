package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// fakeReply is what the fake server sends for one command: raw bytes, then
// fill bytes of filler ('x') written until the client goes away, or
// nothing until the client closes the connection (hold).
type fakeReply struct {
	raw  []byte
	fill int64
	hold bool
}

// fakeRedis speaks just enough RESP2 on loopback for a Fleet: HELLO is
// refused (go-redis falls back to RESP2), TIME, SET, DEL, scripts
// (EVALSHA answers NOSCRIPT, EVAL by bad or the default). bad, when set,
// answers a command first; it returns false to leave it to the default.
type fakeRedis struct {
	t       *testing.T
	ln      net.Listener
	mu      sync.Mutex
	bad     func(cmd []string) (fakeReply, bool)
	written atomic.Int64   // bytes written to clients
	wg      sync.WaitGroup // the accept loop and the connections
	served  sync.WaitGroup // the connections
	conns   []net.Conn
}

func startFake(t *testing.T) *fakeRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeRedis{t: t, ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			s.served.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *fakeRedis) URL() string { return "redis://" + s.ln.Addr().String() + "/0" }

// setBad answers the next commands with f (nil: all good again).
func (s *fakeRedis) setBad(f func(cmd []string) (fakeReply, bool)) {
	s.mu.Lock()
	s.bad = f
	s.mu.Unlock()
}

// readCommand reads one command (an array of bulk strings).
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, 0, n)
	for range n {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(h[1:]))
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(b[:l]))
	}
	return cmd, nil
}

func (s *fakeRedis) serve(c net.Conn) {
	defer s.wg.Done()
	defer s.served.Done()
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		s.mu.Lock()
		bad := s.bad
		s.mu.Unlock()
		var rep fakeReply
		ok := false
		if bad != nil {
			rep, ok = bad(cmd)
		}
		if !ok {
			rep = fakeReply{raw: []byte(defaultReply(cmd))}
		}
		if rep.hold {
			// No answer: wait until the client gives up and closes.
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if !s.write(c, rep.raw) {
			return
		}
		if rep.fill > 0 {
			chunk := []byte(strings.Repeat("x", 64<<10))
			for left := rep.fill; left > 0; left -= int64(len(chunk)) {
				if !s.write(c, chunk[:min(int64(len(chunk)), left)]) {
					return
				}
			}
		}
	}
}

func (s *fakeRedis) write(c net.Conn, b []byte) bool {
	n, err := c.Write(b)
	s.written.Add(int64(n))
	return err == nil
}

func isEval(cmd []string, script string) bool {
	return len(cmd) > 1 && strings.EqualFold(cmd[0], "EVAL") && strings.Contains(cmd[1], script)
}

// readMark tells readScript apart from the other scripts.
const readMark = "redis.pcall('GET'"

func defaultReply(cmd []string) string {
	switch strings.ToUpper(cmd[0]) {
	case "HELLO":
		return "-ERR unknown command 'HELLO'\r\n"
	case "PING":
		return "+PONG\r\n"
	case "TIME":
		now := time.Now()
		sec, us := strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()/1000)
		return fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(sec), sec, len(us), us)
	case "SET":
		return "+OK\r\n"
	case "SETNX":
		return ":1\r\n"
	case "DEL":
		return ":1\r\n"
	case "EVALSHA":
		return "-NOSCRIPT No matching script. Please use EVAL.\r\n"
	case "EVAL":
		if isEval(cmd, readMark) {
			v := `{"scope":"account:shared","code":"billing","untimed":true}`
			return fmt.Sprintf("*1\r\n*3\r\n:1\r\n$%d\r\n%s\r\n:-1\r\n", len(v), v)
		}
		return ":1\r\n"
	}
	return "-ERR unknown command\r\n"
}

// onceFor answers the first readScript call with rep, then leaves every
// command to the default.
func onceFor(rep fakeReply) func([]string) (fakeReply, bool) {
	var used atomic.Bool
	return func(cmd []string) (fakeReply, bool) {
		if isEval(cmd, readMark) && used.CompareAndSwap(false, true) {
			return rep, true
		}
		return fakeReply{}, false
	}
}

// A bad reply to a stop's read: no panic, the call gets the local stop at
// once, the bytes read stay within the limit however much the server
// announces or sends, one sanitized warning says so, the state falls back
// to local and resumes when good replies return.
func TestBadReplyFallsBackAndResumes(t *testing.T) {
	const maxReply = 64 << 10
	cases := []struct {
		name string
		rep  fakeReply
		warn string // in the warning
	}{
		{"huge bulk length", fakeReply{raw: []byte("$9000000000000000000\r\n")}, "19 digits or more"},
		{"huge array length", fakeReply{raw: []byte("*9000000000000000000\r\n")}, "19 digits or more"},
		{"large array length", fakeReply{raw: []byte("*100000000\r\n")}, "100000000 elements announced"},
		{"1 GiB string sent", fakeReply{raw: []byte("$1073741824\r\n"), fill: 1 << 30}, "a string of 1073741824 bytes announced"},
		{"1 GiB line sent", fakeReply{raw: []byte("+"), fill: 1 << 30}, "a reply over 65536 bytes"},
		{"1 GiB in small strings", fakeReply{raw: []byte("*20000\r\n" + strings.Repeat("$1\r\nx\r\n", 20000))}, "a reply over 65536 bytes"},
		{"garbage", fakeReply{raw: []byte("hello\r\n")}, "byte 0x68 where a reply's type belongs"},
		{"bad header", fakeReply{raw: []byte("$12x\r\n")}, "byte 0x78"},
		{"wrong type", fakeReply{raw: []byte(":5\r\n")}, "unreachable"},
		{"escape sequences", fakeReply{raw: []byte("-NOAUTH \x1b]0;PWNED\x07 \x1b[2J\x9b31m auth\r\n")}, "NOAUTH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFake(t)
			var read atomic.Int64
			warns := make(chan string, 16)
			states := make(chan bool, 16)
			f, err := Open(context.Background(), srv.URL(), Options{
				Timeout: 5 * time.Second, Probe: time.Millisecond, MaxReply: maxReply, readBytes: &read,
				Warn: func(m string) { warns <- m }, OnState: func(up bool) { states <- up }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close() })
			if !<-states {
				t.Fatal("not up against the fake server")
			}
			local := retry.NewMemoryCooldowns()
			mine := retry.Cooldown{Scope: "account:mine", Code: "billing", Since: time.Now()}
			if err := local.Set(mine); err != nil {
				t.Fatal(err)
			}
			c := NewCooldowns(f, local)
			srv.setBad(onceFor(tc.rep))
			before := read.Load()
			cd, ok, err := c.Get("account:mine")
			if err != nil || !ok || cd.Code != "billing" {
				t.Fatalf("Get after a bad reply: %+v %v %v, want the local stop", cd, ok, err)
			}
			if n := read.Load() - before; n > maxReply+64<<10 {
				t.Fatalf("%d bytes read for the bad reply, want at most the %d-byte limit and one read", n, maxReply)
			}
			if up := <-states; up {
				t.Fatal("still up after a bad reply")
			}
			w := <-warns
			if !strings.Contains(w, tc.warn) || !strings.Contains(w, "using this process's own state") {
				t.Fatalf("warning %q, want it to say %q and the fallback", w, tc.warn)
			}
			for _, bad := range []string{"\x1b", "\x07", "\x9b", "]0;PWNED", "PWNED"} {
				if strings.Contains(w, bad) {
					t.Fatalf("warning %q carries %q", w, bad)
				}
			}
			// Good replies again: the probe finds Redis back, the shared
			// stop is read again.
			if !<-states {
				t.Fatal("not back up")
			}
			if w := <-warns; !strings.Contains(w, "is back") {
				t.Fatalf("second warning %q, want back", w)
			}
			if cd, ok, err := c.Get("account:shared"); err != nil || !ok || cd.Code != "billing" {
				t.Fatalf("Get after resuming: %+v %v %v, want the shared stop", cd, ok, err)
			}
			select {
			case w := <-warns:
				t.Fatalf("a third warning: %q", w)
			default:
			}
		})
	}
}

// The server sending 1 GiB stops sending once the client refuses the
// reply: the connection is closed, not drained.
func TestBadReplyClosesTheConnection(t *testing.T) {
	srv := startFake(t)
	var read atomic.Int64
	states := make(chan bool, 16)
	f, err := Open(context.Background(), srv.URL(), Options{Timeout: 5 * time.Second, Probe: time.Hour, MaxReply: 64 << 10,
		readBytes: &read, OnState: func(up bool) { states <- up }})
	if err != nil {
		t.Fatal(err)
	}
	if !<-states {
		t.Fatal("not up")
	}
	srv.setBad(onceFor(fakeReply{raw: []byte("$1073741824\r\n"), fill: 1 << 30}))
	c := NewCooldowns(f, nil)
	if _, ok, err := c.Get("account:x"); ok || err != nil {
		t.Fatalf("Get: %v %v", ok, err)
	}
	_ = f.Close()
	srv.served.Wait() // every connection's goroutine ended: the writer saw the connection closed
	if w := srv.written.Load(); w > 64<<20 {
		t.Fatalf("the server wrote %d bytes before its writes failed, want a few MiB at most (socket buffers)", w)
	}
	if r := read.Load(); r > 256<<10 {
		t.Fatalf("the client read %d bytes", r)
	}
}

// An error reply Redis gives for one key (a script error, a key of another
// type) is no outage: the state stays up, the key's warning comes once and
// is sanitized, the call gets the local stop.
func TestErrorReplyWarnsOncePerKey(t *testing.T) {
	srv := startFake(t)
	warns := make(chan string, 16)
	f, err := Open(context.Background(), srv.URL(), Options{Timeout: 5 * time.Second, Probe: time.Hour, Warn: func(m string) { warns <- m }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	srv.setBad(func(cmd []string) (fakeReply, bool) {
		if isEval(cmd, readMark) {
			return fakeReply{raw: []byte("-ERR \x1b]0;PWNED\x07 WRONGTYPE here\r\n")}, true
		}
		return fakeReply{}, false
	})
	local := retry.NewMemoryCooldowns()
	_ = local.Set(retry.Cooldown{Scope: "account:mine", Code: "billing", Since: time.Now()})
	c := NewCooldowns(f, local)
	for range 3 {
		if cd, ok, err := c.Get("account:mine"); err != nil || !ok || cd.Code != "billing" {
			t.Fatalf("Get: %+v %v %v, want the local stop", cd, ok, err)
		}
	}
	if !f.Up() {
		t.Fatal("down after an error reply")
	}
	w := <-warns
	if !strings.Contains(w, "limitscope:cd:account:mine") || !strings.Contains(w, "WRONGTYPE here") || strings.ContainsAny(w, "\x1b\x07") || strings.Contains(w, "PWNED") {
		t.Fatalf("warning %q", w)
	}
	select {
	case w := <-warns:
		t.Fatalf("a second warning for the same key: %q", w)
	default:
	}
}

// fakeClock is a settable local clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// One reply slower than the timeout while Redis answered within Patience:
// that call runs on local state, the fleet stays up, no warning, and the
// next command is shared again. A timeout when nothing has answered for
// Patience takes the state down.
func TestSlowReplyTolerated(t *testing.T) {
	srv := startFake(t)
	clock := &fakeClock{now: time.Now()}
	warns := make(chan string, 16)
	f, err := Open(context.Background(), srv.URL(), Options{Timeout: 50 * time.Millisecond, Probe: time.Hour, Patience: 3 * time.Second,
		Now: clock.Now, Warn: func(m string) { warns <- m }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if !f.Up() {
		t.Fatal("not up")
	}
	local := retry.NewMemoryCooldowns()
	_ = local.Set(retry.Cooldown{Scope: "account:mine", Code: "local", Since: time.Now()})
	c := NewCooldowns(f, local)
	srv.setBad(onceFor(fakeReply{hold: true}))
	clock.Add(2 * time.Second) // within Patience of the last answer (Open's)
	if cd, ok, _ := c.Get("account:mine"); !ok || cd.Code != "local" {
		t.Fatalf("the slow call: %+v %v, want the local stop", cd, ok)
	}
	if !f.Up() {
		t.Fatal("one slow reply took the fleet down")
	}
	if cd, ok, _ := c.Get("account:shared"); !ok || cd.Code != "billing" {
		t.Fatalf("the next call: %+v %v, want the shared stop", cd, ok)
	}
	// That answer restarts Patience; a timeout more than Patience after
	// it is an outage.
	srv.setBad(onceFor(fakeReply{hold: true}))
	clock.Add(3 * time.Second)
	if cd, ok, _ := c.Get("account:mine"); !ok || cd.Code != "local" {
		t.Fatalf("the call: %+v %v, want the local stop", cd, ok)
	}
	if f.Up() {
		t.Fatal("up after a timeout with no answer for Patience")
	}
	if w := <-warns; !strings.Contains(w, "no answer in time") {
		t.Fatalf("warning %q", w)
	}
}

// A panic inside a command is recovered and taken as a bad reply.
func TestPanicInCommandRecovered(t *testing.T) {
	srv := startFake(t)
	warns := make(chan string, 16)
	f, err := Open(context.Background(), srv.URL(), Options{Timeout: 5 * time.Second, Probe: time.Hour, Warn: func(m string) { warns <- m }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	err = f.call(context.Background(), func(context.Context) error { panic("makeslice: len out of range") })
	var br *BadReplyError
	if !errors.As(err, &br) || !strings.Contains(err.Error(), "makeslice") {
		t.Fatalf("err %v, want a BadReplyError naming the panic", err)
	}
	f.failed(context.Background(), err)
	if f.Up() {
		t.Fatal("up after a panic")
	}
	if w := <-warns; !strings.Contains(w, "makeslice") {
		t.Fatalf("warning %q", w)
	}
}
