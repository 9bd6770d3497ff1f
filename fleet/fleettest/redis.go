package fleettest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a redis-server the test started on a free loopback port,
// in a temporary directory.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	read chan struct{} // closed when the server's output is read to its end
}

// Start starts a redis-server for t (stopped at the end), with extra
// arguments, or skips t when the machine has none, unless CI=true (then it
// fails).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found (CI installs it: .ci/run)")
		}
		t.Skip("redis-server not installed; skipping the shared-state tests")
	}
	s := &Server{t: t, bin: bin, port: FreePort(t), dir: t.TempDir(), args: extra}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Restart runs the server (again, on the same port, after Stop) and waits
// until it says it accepts connections (its own log line, not a sleep).
func (s *Server) Restart() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", ""}, s.args...)
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	ready := make(chan bool, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "Ready to accept connections") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-read
			_ = cmd.Wait()
			s.t.Fatalf("redis-server on port %d exited before it was ready", s.port)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-read
		_ = cmd.Wait()
		s.t.Fatal("redis-server not ready after 30s")
	}
	s.cmd, s.read = cmd, read
}

// Stop kills the server (SIGKILL: no goodbye to its clients) and waits for
// it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.read
	_ = s.cmd.Wait()
	s.cmd = nil
}

// FreePort returns a loopback port nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return p
}
