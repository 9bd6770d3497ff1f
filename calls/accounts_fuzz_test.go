package calls

import (
	"strings"
	"testing"
)

// FuzzParseAccounts: any accounts file is read or refused, never a panic,
// and an error never repeats a value or a name from the file (either may
// be a key pasted by mistake).
func FuzzParseAccounts(f *testing.F) {
	for _, s := range []string{`{"accounts":{"openai@team":"OPENAI_TEAM_KEY"}}`, `{"accounts":{"x":"sk-secret-1"}}`,
		`{"accounts":{"openai@t":"sk-proj-abc"}}`, `{`, `[]`, `{"accounts":{"gemini@A":"V"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseAccounts("accounts.json", b)
		if err != nil {
			if strings.Contains(err.Error(), "sk-") && !strings.Contains("accounts.json", "sk-") && strings.Contains(string(b), "sk-") &&
				!strings.Contains(err.Error(), "invalid character") {
				t.Fatalf("the error repeats the file: %v", err)
			}
			return
		}
		for k, v := range m {
			if !envName.MatchString(v) || !strings.Contains(k, "@") {
				t.Fatalf("accepted %q: %q", k, v)
			}
		}
	})
}
