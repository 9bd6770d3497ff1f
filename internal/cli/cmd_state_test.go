package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/fleet/fleettest"
)

// quotaServer is an OpenAI-compatible endpoint that answers every request
// with a 429 insufficient_quota (a stop a person must clear), counting the
// requests.
func quotaServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Two limitscope processes on one Redis: A's quota stop makes B's next call
// stop with no request sent (A has exited before B starts: ordered, not
// timed).
func TestStateTwoProcessesShareQuotaStop(t *testing.T) {
	r := fleettest.Start(t)
	srv, n := quotaServer(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	send := func(name string) (int, string) {
		dir := t.TempDir()
		cmd := exec.Command(exe, "send", "--no-history", "--max-attempts", "1", "--model", "openai/gpt-5.4-mini", "hi")
		cmd.Env = append(childEnv(t, dir), "OPENAI_API_KEY=sk-test-shared-account", "OPENAI_BASE_URL="+srv.URL+"/v1",
			"LIMITSCOPE_REDIS_URL="+r.URL())
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return code, string(out)
	}
	if code, out := send("A"); code != 3 || n.Load() != 1 {
		t.Fatalf("A: exit %d after %d requests, want 3 (stopped) after 1:\n%s", code, n.Load(), out)
	}
	code, out := send("B")
	if code != 3 || !strings.Contains(out, "cooling down") {
		t.Fatalf("B: exit %d, want 3 and the cooldown named:\n%s", code, out)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("the provider saw %d requests, want 1 (B sent none)", got)
	}
}

// The Redis password is never printed: not from the URL, not from
// REDISCLI_AUTH, not in a warning, an error or --json.
func TestStatePasswordNeverPrinted(t *testing.T) {
	const pw = "hunter2-s3cret"
	r := fleettest.Start(t, "--requirepass", "the-right-one")
	port := strconv.Itoa(fleettest.FreePort(t))
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string // in stderr
	}{
		{"unreachable, password in the URL", []string{"--state", "redis://:" + pw + "@127.0.0.1:" + port + "/0"}, nil, 0, "unreachable"},
		{"wrong password in the URL", []string{"--state", "redis://default:" + pw + "@" + strings.TrimPrefix(r.URL(), "redis://")}, nil, 0, "unreachable"},
		{"wrong REDISCLI_AUTH", []string{"--state", r.URL()}, map[string]string{"REDISCLI_AUTH": pw}, 0, "unreachable"},
		{"malformed URL", []string{"--state", "redis://:" + pw + "@127.0.0.1:" + port + "/notadb"}, nil, 2, "--state"},
		{"malformed URL from the environment", nil, map[string]string{"LIMITSCOPE_REDIS_URL": "redis://:" + pw + "@[::1"}, 2, "LIMITSCOPE_REDIS_URL: shared state URL: not a URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := newTestApp(isolatedEnv(t, tc.env))
			args := append([]string{"send", "--sim", "--json", "--no-history", "--model", "openai/gpt-5.4-mini"}, tc.args...)
			code := run(context.Background(), ta.app, append(args, "hi"))
			out := ta.out.String() + ta.errOut.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			if strings.Contains(out, pw) {
				t.Fatalf("the password is printed:\n%s", out)
			}
			if !strings.Contains(ta.errOut.String(), tc.want) {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, ta.errOut)
			}
			if tc.code == 0 && strings.Count(ta.errOut.String(), "unreachable") != 1 {
				t.Fatalf("the warning is not given exactly once:\n%s", ta.errOut)
			}
		})
	}
}

// bench --state runs its limitscope policy on the shared state: the run
// works, and it leaves the shared bucket of the simulator's account in
// Redis.
func TestStateBench(t *testing.T) {
	r := fleettest.Start(t)
	ta := newTestApp(isolatedEnv(t))
	code := run(context.Background(), ta.app, []string{"bench", "--sim", "--policy", "limitscope", "--requests", "6", "--concurrency", "3",
		"--model", "openai/gpt-5.4-mini", "--state", r.URL(), "--json"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, ta.errOut)
	}
	if strings.Contains(ta.errOut.String(), "unreachable") {
		t.Fatalf("Redis unreachable:\n%s", ta.errOut)
	}
	keys := redisKeys(t, r.URL(), "limitscope:pace:sim:*")
	if len(keys) == 0 {
		t.Fatal("no shared pacing state in Redis after bench --state")
	}
}

// redisKeys lists the keys matching pattern.
func redisKeys(t *testing.T, url, pattern string) []string {
	t.Helper()
	o, err := fleet.ParseURL(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	keys, err := c.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
