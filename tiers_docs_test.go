package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/stream"
)

// tierModel is the --model of a send example that names a service tier
// ("" for any other command).
func tierModel(args []string) string {
	if len(args) == 0 || args[0] != "send" {
		return ""
	}
	if m := flagValue(args, "--model"); strings.Contains(m, "+") {
		return m
	}
	return ""
}

// tierRefused reports whether a send example names a tier its provider
// lacks: refused before anything is sent, so no call is recorded.
func tierRefused(args []string) bool {
	return strings.HasSuffix(tierModel(args), "+turbo")
}

// checkTierExample runs one of docs/service-tiers.md's send examples and
// checks it does what the document says: an unknown tier refused before
// sending; a flex target meeting short capacity three times, then served
// by the default tier; a priority request served at standard, shown as a
// downgrade.
func checkTierExample(t *testing.T, c readmeCommand, runCmd func([]string) (int, string, string)) {
	code, out, errOut := runCmd(c.args)
	model := tierModel(c.args)
	if tierRefused(c.args) {
		if code != exitUsage || !strings.Contains(errOut, `openai has no service tier "turbo"`) {
			t.Errorf("%s: exit %d, %s; want exit 2 naming the tier", c.line, code, errOut)
		}
		return
	}
	var doc tierSendJSON
	if err := json.Unmarshal([]byte(out), &doc); code != exitOK || err != nil {
		t.Errorf("%s: exit %d, %v\n%s%s", c.line, code, err, out, errOut)
		return
	}
	switch {
	case strings.HasSuffix(model, "+flex"):
		if len(doc.Attempts) != 4 || doc.ServedBy == nil || doc.ServedBy.String() != "openai/gpt-5.4-mini" {
			t.Errorf("%s: %d attempts, served by %v; want 3 flex_capacity then the default tier", c.line, len(doc.Attempts), doc.ServedBy)
			return
		}
		for _, a := range doc.Attempts[:3] {
			if a.Class != "flex_capacity" || a.Status != 429 || a.Tier != "flex" {
				t.Errorf("%s: flex attempt %+v", c.line, a)
			}
		}
		if a := doc.Attempts[3]; a.Class != "ok" || a.Tier != "" || a.ServedTier != "default" || a.Downgraded {
			t.Errorf("%s: default attempt %+v", c.line, a)
		}
	case strings.HasSuffix(model, "+priority"):
		if len(doc.Attempts) != 1 || doc.Attempts[0].ServedTier != "standard" || !doc.Attempts[0].Downgraded || doc.Attempts[0].Tier != "priority" {
			t.Errorf("%s: attempts %+v; want one, served standard, downgraded", c.line, doc.Attempts)
		}
	default:
		t.Errorf("%s: this tier example has no check here: add one", c.line)
	}
}

// tierSendJSON is what the tier examples read of `send --json`.
type tierSendJSON struct {
	ServedBy *stream.Target `json:"served_by"`
	Attempts []struct {
		Class      string `json:"class"`
		Status     int    `json:"status"`
		Tier       string `json:"tier"`
		ServedTier string `json:"served_tier"`
		Downgraded bool   `json:"downgraded"`
	} `json:"attempts"`
}
