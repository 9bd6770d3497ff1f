package stream

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// No code outside the provider table asks for a provider by name: every
// per-provider fact is a column of providers.go.
func TestNoProviderNameOutsideTheTable(t *testing.T) {
	names := map[string]bool{}
	for _, p := range Providers() {
		names[p.Name] = true
	}
	files := moduleSources(t, "..")
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if tableExempt[filepath.ToSlash(f)] {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && names[strings.ToLower(s)] {
				t.Errorf("%s: provider name %s outside the table", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: is the walk reading the module?", checked)
	}
}

// tableExempt is the non-test files that may name providers: the table
// itself, the simulator's data (its own provider table with each
// provider's default limits, and the model catalogue) and the console's
// demo fixture.
var tableExempt = map[string]bool{
	"../stream/providers.go":          true,
	"../sim/dialect.go":               true, // the simulator's provider table
	"../sim/models.go":                true, // each provider's model catalogue
	"../sim/openai.go":                true, // the OpenAI-compatible providers' error bodies
	"../internal/sanitize/secrets.go": true,
	"../tui/internal/tuidemo/main.go": true,
}

// moduleSources is every non-test Go file of the module under root,
// without third_party and testdata.
func moduleSources(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "third_party" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every row's dialect is one stream knows, and a row's quirks reach the
// request: the columns, not names, decide.
func TestTableColumnsDecideTheRequest(t *testing.T) {
	for _, p := range Providers() {
		if _, ok := dialects[p.Dialect]; !ok {
			t.Errorf("%s: unknown dialect %q", p.Name, p.Dialect)
		}
	}
	// A new OpenAI-compatible provider is a row: it gets the dialect's
	// defaults and its own quirks.
	row := ProviderInfo{Name: "newco", Dialect: DialectOpenAI, NoStreamOptions: true, MaxTokensField: "max_output"}
	hr, err := buildRequest(t.Context(), &row, Endpoint{Provider: "newco", BaseURL: "http://x.test/v1", Key: "k"},
		Request{Target: Target{Provider: "newco", Model: "m"}, Prompt: "hi", MaxTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	b := string(mustRead(t, hr.Body))
	if hr.URL.Path != "/v1/chat/completions" || strings.Contains(b, "stream_options") || !strings.Contains(b, `"max_output":7`) ||
		hr.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("%s %s %v", hr.URL, b, hr.Header)
	}
}

func mustRead(t *testing.T, r interface{ Read([]byte) (int, error) }) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out
		}
	}
}

// Every provider's keys are in a shape internal/sanitize redacts: a key
// quoted in a provider's message or a caller's header never prints.
func TestSanitizerKnowsEveryProvidersKeys(t *testing.T) {
	for _, p := range Providers() {
		if p.Account != "" {
			continue
		}
		key := strings.TrimPrefix(p.KeyExample, "Bearer ")
		if key == "" {
			t.Errorf("%s: no KeyExample: give the shape of the provider's keys", p.Name)
			continue
		}
		for _, msg := range []string{p.KeyExample, "Incorrect API key provided: " + p.KeyExample + "."} {
			if got := sanitize.Secrets(msg); strings.Contains(got, key) {
				t.Errorf("%s: sanitize.Secrets(%q) = %q: add the shape of its keys to internal/sanitize/secrets.go", p.Name, msg, got)
			}
		}
	}
}
