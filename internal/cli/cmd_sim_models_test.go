package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/sim"
)

// `sim --list` lists each provider's models, the scenario file's additions
// included; a scenario file that names a model badly is a usage error.
func TestRunSimListModels(t *testing.T) {
	var out bytes.Buffer
	a, _ := simTestApp(t, &out)
	if code := runSim(t.Context(), a, []string{"--list"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, pm := range sim.Catalogue() {
		for _, m := range pm.Models {
			if !strings.Contains(out.String(), " "+m.ID) {
				t.Errorf("--list lacks %s/%s", pm.Provider, m.ID)
			}
		}
	}
	file := filepath.Join(t.TempDir(), "ft.ini")
	if err := os.WriteFile(file, []byte("[openai]\nmodels = my-finetune\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := runSim(t.Context(), a, []string{"--list", "--json", "--scenario-file", file}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct{ Models []sim.ProviderModels }
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Models) != len(sim.Providers()) {
		t.Fatalf("%v %s", err, out.String())
	}
	found := false
	for _, m := range doc.Models[0].Models {
		found = found || (m.ID == "my-finetune" && m.Added)
	}
	if !found {
		t.Errorf("--list --json lacks the file's model: %+v", doc.Models[0])
	}
	if err := os.WriteFile(file, []byte("[openai]\nmodels = claude-haiku-5-5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, stderr := simTestApp(t, &out)
	if code := runSim(t.Context(), a, []string{"--list", "--scenario-file", file}); code != exitUsage || !strings.Contains(stderr.String(), "ft.ini:2: models:") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// The banner prints the Bedrock lines both AWS SDKs work with as printed
// (the simulated SigV4 keys, a Region; no bearer token), the simulated key
// id survives the redaction, and a scenario name's escapes never print.
func TestRunSimBannerBedrockAndName(t *testing.T) {
	file := filepath.Join(t.TempDir(), "demo.ini")
	if err := os.WriteFile(file, []byte("name = demo\x1b]0;owned\x07\x1b[2J\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a, stderr := simTestApp(t, &out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := runSim(ctx, a, []string{"--listen", "127.0.0.1:0", "--scenario-file", file}); code != exitOK {
		t.Fatalf("exit %d (%s)", code, stderr)
	}
	banner := out.String()
	for _, want := range []string{"export AWS_ENDPOINT_URL_BEDROCK_RUNTIME=http://127.0.0.1:", "/bedrock\n",
		"export AWS_ACCESS_KEY_ID=" + sim.FakeAWSAccessKeyID + "\n", "export AWS_SECRET_ACCESS_KEY=" + sim.FakeAWSSecretAccessKey + "\n",
		"export AWS_REGION=us-east-1\n", "scenario demo,"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "AWS_BEARER_TOKEN_BEDROCK") || strings.ContainsAny(banner+stderr.String(), "\x1b\x07") {
		t.Errorf("banner prints a bearer token or an escape:\n%q", banner)
	}
	if got := sanitize.Printable(banner); !strings.Contains(got, sim.FakeAWSAccessKeyID) {
		t.Errorf("the simulated key id is redacted")
	}
}
