package tui

import (
	"strings"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The targets pane names each account, and an account's quota stop marks
// that account's targets only, not the same provider's other account.
func TestTargetsPaneAccounts(t *testing.T) {
	a := stream.Target{Provider: "openai", Account: "a", Model: "gpt-5.4-mini"}
	b := stream.Target{Provider: "openai", Account: "b", Model: "gpt-5.4-mini"}
	p := newTargetsPane([]TargetInfo{{Target: a, Available: true}, {Target: b, Available: true}}, []stream.Target{a, b})
	if s := paneText(p, t0); !strings.Contains(s, "openai@a/gpt-5.4-mini") || !strings.Contains(s, "openai@b/gpt-5.4-mini") {
		t.Fatalf("accounts not shown:\n%s", s)
	}
	p.cooldowns([]retry.Cooldown{{Scope: "account:openai:0123456789ab", Since: t0, Target: a.String(), Code: "insufficient_quota"}}, t0)
	if !p.get(a).stopped || p.get(b).stopped {
		t.Errorf("account a's stop: a stopped %v, b stopped %v; want only a", p.get(a).stopped, p.get(b).stopped)
	}
}
