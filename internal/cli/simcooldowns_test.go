package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
)

// TestSimulatedQuotaStopEndsWithItsSimulator: a quota stop under
// `send --sim` is the embedded simulator's and ends with it: the next
// `send --sim` run is answered, and the history's cooldown store never saw
// it. A real quota stop still persists in the file.
func TestSimulatedQuotaStopEndsWithItsSimulator(t *testing.T) {
	t.Parallel()
	env := isolatedEnv(t)
	db := env["LIMITSCOPE_DB"]
	quota := filepath.Join(t.TempDir(), "quota.ini")
	if err := os.WriteFile(quota, []byte("name = quota\n[openai]\nfault = spend_cap 100%\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(env)
	if code := run(context.Background(), ta.app, []string{"send", "--sim", "--scenario-file", quota, "--model", "openai/gpt-5.4-mini", "hi"}); code != exitStopped {
		t.Fatalf("the quota run: exit %d, want %d; stderr:\n%s", code, exitStopped, ta.errOut)
	}
	if list, err := store.NewCooldowns(db, store.Options{}).List(); err != nil || len(list) != 0 {
		t.Fatalf("the simulated stop reached the history's cooldowns: %v %v", list, err)
	}
	ta = newTestApp(env)
	if code := run(context.Background(), ta.app, []string{"send", "--sim", "--max-tokens", "8", "--model", "openai/gpt-5.4-mini", "hi"}); code != exitOK {
		t.Fatalf("the next --sim run: exit %d, want 0; stderr:\n%s", code, ta.errOut)
	}

	// Real providers (here a simulator behind the real base URLs, as a
	// user's own would be): the stop persists for the next process.
	r, real := simEnv(t)
	real = isolatedEnv(t, real, map[string]string{"LIMITSCOPE_DB": db})
	if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	ta = newTestApp(real)
	if code := run(context.Background(), ta.app, []string{"send", "--model", "openai/gpt-5.4-mini", "hi"}); code != exitStopped {
		t.Fatalf("the real quota run: exit %d, want %d; stderr:\n%s", code, exitStopped, ta.errOut)
	}
	if list, err := store.NewCooldowns(db, store.Options{}).List(); err != nil || len(list) != 1 {
		t.Fatalf("the real stop is not in the history's cooldowns: %v %v", list, err)
	}
	ta = newTestApp(real)
	if code := run(context.Background(), ta.app, []string{"send", "--model", "openai/gpt-5.4-mini", "hi"}); code != exitStopped {
		t.Fatalf("after a real stop: exit %d, want %d (cooldown); stderr:\n%s", code, exitStopped, ta.errOut)
	}
}
