package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// docCommands extracts the limitscope commands of a document's ```sh
// blocks (a "# ..." comment after a command is its note).
func docCommands(t *testing.T, path string) []readmeCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeCommand
	inSh := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inSh = !inSh && strings.TrimPrefix(line, "```") == "sh"
			continue
		}
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); !inSh || cmd == "" {
			continue
		}
		words := shellWords(t, cmd)
		if words[0] != "limitscope" {
			t.Fatalf("%s: command %q: not limitscope", path, cmd)
		}
		out = append(out, readmeCommand{line: cmd, args: words[1:]})
	}
	return out
}

// TestServiceTiersDoc runs every command docs/service-tiers.md shows and
// checks it does what the document says.
func TestServiceTiersDoc(t *testing.T) {
	t.Parallel()
	cmds := docCommands(t, "docs/service-tiers.md")
	if len(cmds) != 3 {
		t.Fatalf("found %d commands in docs/service-tiers.md, want 3", len(cmds))
	}
	env := e2eEnv(t, t.TempDir())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		cmd := exec.Command(exe, c.args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := 0
		var ee *exec.ExitError
		if err := cmd.Run(); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		model := flagValue(c.args, "--model")
		if strings.HasSuffix(model, "+turbo") {
			if code != exitUsage || !strings.Contains(errb.String(), `openai has no service tier "turbo"`) {
				t.Errorf("%s: exit %d, %s; want exit 2 naming the tier", c.line, code, errb.String())
			}
			continue
		}
		var doc sendDoc
		if err := json.Unmarshal(out.Bytes(), &doc); code != exitOK || err != nil {
			t.Fatalf("%s: exit %d, %v\n%s%s", c.line, code, err, out.String(), errb.String())
		}
		switch {
		case strings.HasSuffix(model, "+flex"):
			if len(doc.Attempts) != 4 || doc.ServedBy == nil || doc.ServedBy.String() != "openai/gpt-5.4-mini" {
				t.Fatalf("%s: %d attempts, served by %v; want 3 flex_capacity then the default tier", c.line, len(doc.Attempts), doc.ServedBy)
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
			t.Errorf("docs/service-tiers.md command %q has no check here: add one", c.line)
		}
	}
}

// TestServedTierWords checks what `history show` says of an attempt's
// served tier (nothing when the answer named none).
func TestServedTierWords(t *testing.T) {
	a := retry.Attempt{Target: stream.Target{Provider: "openai", Model: "m", Tier: "priority"}, ServedTier: "default", Downgraded: true}
	if got := servedTierWords(a); got != "  served default, downgraded from priority" {
		t.Errorf("words %q", got)
	}
	if got := servedTierWords(retry.Attempt{}); got != "" {
		t.Errorf("words without a served tier %q", got)
	}
}
