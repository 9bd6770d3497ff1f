package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// setShared records cd in the fleet's shared state at url only (as another
// process's stop would be).
func setShared(t *testing.T, url string, cd retry.Cooldown) {
	t.Helper()
	f, err := fleet.Open(context.Background(), url, fleet.Options{})
	if err != nil || !f.Up() {
		t.Fatalf("open the shared state: %v (up %v)", err, f != nil && f.Up())
	}
	defer f.Close()
	if err := fleet.NewCooldowns(f, retry.NewMemoryCooldowns()).Set(cd); err != nil {
		t.Fatal(err)
	}
}

// cooldownsDoc is `cooldowns --json`.
type cooldownsDoc struct {
	State     string `json:"state"`
	Cooldowns []struct {
		Scope  string `json:"scope"`
		Local  bool   `json:"local"`
		Shared bool   `json:"shared"`
		Code   string `json:"code"`
	} `json:"cooldowns"`
}

// With --state, `cooldowns` lists the fleet's shared stops beside the
// history file's, saying which is which; `cooldowns clear SCOPE` clears a
// shared stop in Redis (for every process), and `cooldowns clear` every
// one, local and shared. Without --state only the file's are seen.
func TestCooldownsSharedState(t *testing.T) {
	r := fleettest.Start(t)
	db := filepath.Join(t.TempDir(), "h.db")
	env := map[string]string{"LIMITSCOPE_DB": db, "LIMITSCOPE_REDIS_URL": ""}
	now := time.Now()
	local := store.NewCooldowns(db, store.Options{})
	for _, c := range []retry.Cooldown{
		{Scope: "account:openai:aaaa", Since: now, Target: "openai/gpt-5.4-mini", Code: "insufficient_quota"},
		{Scope: "account:openai:both", Since: now, Target: "openai/gpt-5.4-mini", Code: "billing_hard_limit_reached"},
	} {
		if err := local.Set(c); err != nil {
			t.Fatal(err)
		}
	}
	setShared(t, r.URL(), retry.Cooldown{Scope: "account:anthropic:bbbb", Since: now, Target: "anthropic/claude-haiku-4-5", Code: "credit_balance"})
	setShared(t, r.URL(), retry.Cooldown{Scope: "account:openai:both", Since: now, Until: now.Add(time.Hour), Target: "openai/gpt-5.4-mini", Code: "billing_hard_limit_reached"})

	list := func(args ...string) cooldownsDoc {
		t.Helper()
		code, out, errOut := histRun(t, env, false, runCooldowns, append(args, "--json")...)
		var doc cooldownsDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
			t.Fatalf("cooldowns %v: exit %d, %v: %s %s", args, code, err, out, errOut)
		}
		return doc
	}
	if doc := list(); len(doc.Cooldowns) != 2 || doc.State != "" || doc.Cooldowns[0].Shared {
		t.Fatalf("without --state, the file's two alone: %+v", doc)
	}
	doc := list("--state", r.URL())
	want := []struct {
		scope         string
		local, shared bool
	}{{"account:anthropic:bbbb", false, true}, {"account:openai:aaaa", true, false}, {"account:openai:both", true, true}}
	if len(doc.Cooldowns) != len(want) || doc.State != r.URL() {
		t.Fatalf("with --state: %+v", doc)
	}
	for i, w := range want {
		if c := doc.Cooldowns[i]; c.Scope != w.scope || c.Local != w.local || c.Shared != w.shared {
			t.Errorf("cooldown %d: %+v, want %+v", i, c, w)
		}
	}
	// The text says which are shared; LIMITSCOPE_REDIS_URL does as --state.
	env["LIMITSCOPE_REDIS_URL"] = r.URL()
	code, out, _ := histRun(t, env, false, runCooldowns)
	if code != 0 || !strings.HasPrefix(out, "SCOPE\tSTATE\tWHERE\t") || !strings.Contains(out, "account:anthropic:bbbb\tactive\tshared\t") ||
		!strings.Contains(out, "account:openai:aaaa\tactive\tlocal\t") || !strings.Contains(out, "account:openai:both\tactive\tlocal+shared\t") {
		t.Fatalf("list with LIMITSCOPE_REDIS_URL:\n%s", out)
	}
	// Listing shared none of the file's stops.
	if keys := redisKeys(t, r.URL(), "limitscope:cd:*"); len(keys) != 2 {
		t.Fatalf("listing changed the shared state: %v", keys)
	}

	// A shared stop cleared from the CLI is gone for the whole fleet.
	if code, out, errOut := histRun(t, env, false, runCooldowns, "clear", "account:anthropic:bbbb"); code != 0 || !strings.Contains(out, "cleared account:anthropic:bbbb") {
		t.Fatalf("clear a shared stop: %d %q %q", code, out, errOut)
	}
	if keys := redisKeys(t, r.URL(), "limitscope:cd:account:anthropic:*"); len(keys) != 0 {
		t.Fatalf("the shared stop is still in Redis: %v", keys)
	}
	// clear with no scope: every one, in the file and in Redis.
	if code, out, errOut := histRun(t, env, false, runCooldowns, "clear"); code != 0 || !strings.Contains(out, "cleared account:openai:both") || !strings.Contains(out, "cleared account:openai:aaaa") {
		t.Fatalf("clear all: %d %q %q", code, out, errOut)
	}
	if keys := redisKeys(t, r.URL(), "limitscope:cd:*"); len(keys) != 0 {
		t.Fatalf("shared stops left after clear: %v", keys)
	}
	if left, err := local.List(); err != nil || len(left) != 0 {
		t.Fatalf("the file's stops after clear: %+v %v", left, err)
	}
}

// With the shared state away, `cooldowns` lists the file's stops and says
// so; `cooldowns clear` clears the file's, says the fleet's were not and
// fails; neither prints the password.
func TestCooldownsSharedStateUnreachable(t *testing.T) {
	const pw = "hunter2-s3cret"
	url := "redis://:" + pw + "@127.0.0.1:" + strconv.Itoa(fleettest.FreePort(t)) + "/0"
	db := filepath.Join(t.TempDir(), "h.db")
	env := map[string]string{"LIMITSCOPE_DB": db, "LIMITSCOPE_REDIS_URL": url}
	if err := store.NewCooldowns(db, store.Options{}).Set(retry.Cooldown{Scope: "account:openai:aaaa", Since: time.Now(), Code: "insufficient_quota"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := histRun(t, env, false, runCooldowns)
	if code != 0 || !strings.Contains(out, "account:openai:aaaa\tactive\tlocal\t") || !strings.Contains(errOut, "unreachable: these are this machine's cooldowns only") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	code, out2, errOut2 := histRun(t, env, false, runCooldowns, "clear")
	if code != exitFailed || !strings.Contains(out2, "cleared account:openai:aaaa") || !strings.Contains(errOut2, "nothing was cleared for the fleet") {
		t.Fatalf("clear: %d %q %q", code, out2, errOut2)
	}
	if all := out + errOut + out2 + errOut2; strings.Contains(all, pw) || !strings.Contains(errOut, "xxxxx") {
		t.Fatalf("the password is printed, or the URL not shown redacted:\n%s", all)
	}
	if code, _, errOut := histRun(t, env, false, runCooldowns, "--state", "redis://:"+pw+"@127.0.0.1:1/notadb"); code != exitUsage || strings.Contains(errOut, pw) || !strings.Contains(errOut, "--state") {
		t.Fatalf("a malformed --state: %d %q", code, errOut)
	}
}

// info names the state backend: local without a URL, else the Redis URL
// (its password redacted), where it came from and whether it answers.
func TestInfoStateBackend(t *testing.T) {
	r := fleettest.Start(t, "--requirepass", "the-right-one")
	const pw = "the-right-one"
	withPw := "redis://:" + pw + "@" + strings.TrimPrefix(r.URL(), "redis://")
	type infoDoc struct {
		State struct {
			Backend   string `json:"backend"`
			URL       string `json:"url"`
			Source    string `json:"source"`
			Reachable *bool  `json:"reachable"`
		} `json:"state"`
	}
	info := func(env map[string]string, args ...string) (infoDoc, string) {
		t.Helper()
		ta := newTestApp(isolatedEnv(t, env))
		code := run(context.Background(), ta.app, append([]string{"info", "--json"}, args...))
		var d infoDoc
		if err := json.Unmarshal(ta.out.Bytes(), &d); err != nil || code != 0 {
			t.Fatalf("info %v: exit %d, %v: %s %s", args, code, err, ta.out, ta.errOut)
		}
		ta2 := newTestApp(isolatedEnv(t, env))
		_ = run(context.Background(), ta2.app, append([]string{"info"}, args...))
		all := ta.out.String() + ta.errOut.String() + ta2.out.String() + ta2.errOut.String()
		if strings.Contains(all, pw) {
			t.Fatalf("info prints the password:\n%s", all)
		}
		return d, ta2.out.String()
	}
	d, text := info(map[string]string{"LIMITSCOPE_REDIS_URL": ""})
	if d.State.Backend != "local" || d.State.URL != "" || !strings.Contains(text, "state\tlocal\t") {
		t.Errorf("no URL: %+v %q", d.State, text)
	}
	d, text = info(map[string]string{"LIMITSCOPE_REDIS_URL": withPw})
	if d.State.Backend != "redis" || d.State.Source != "LIMITSCOPE_REDIS_URL" || d.State.URL != fleet.Redact(withPw) ||
		d.State.Reachable == nil || !*d.State.Reachable || !strings.Contains(text, "state\t"+fleet.Redact(withPw)+"\t") || !strings.Contains(text, "; reachable)\n") {
		t.Errorf("LIMITSCOPE_REDIS_URL: %+v %q", d.State, text)
	}
	d, _ = info(map[string]string{"LIMITSCOPE_REDIS_URL": withPw}, "--state", r.URL())
	if d.State.Source != "--state" || d.State.Reachable == nil || *d.State.Reachable {
		t.Errorf("--state without the password: %+v (want unreachable: Redis asks for one)", d.State)
	}
}
