package stream

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Curl renders the request that Do would send for req as a curl command, with
// the credential replaced by keyText (e.g. "$OPENAI_API_KEY", so the copied
// command works in the user's shell and never carries the key itself).
func Curl(ep Endpoint, req Request, keyText string) (string, error) {
	ep.Key = Secret(keyText)
	r, err := BuildRequest(context.Background(), ep, req)
	if err != nil {
		return "", err
	}
	var body []byte
	if r.Body != nil {
		if body, err = io.ReadAll(r.Body); err != nil {
			return "", fmt.Errorf("curl: reading the request body: %w", err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "curl -N %s", shellQuote(RedactURL(r.URL.String())))
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range r.Header[k] {
			// The key placeholder must expand in the shell: double quotes.
			fmt.Fprintf(&b, " \\\n  -H %s", headerArg(k, v, keyText))
		}
	}
	if len(body) > 0 {
		fmt.Fprintf(&b, " \\\n  -d %s", shellQuote(string(body)))
	}
	return b.String(), nil
}

func headerArg(k, v, keyText string) string {
	if keyText != "" && strings.Contains(v, keyText) {
		return `"` + k + ": " + strings.NewReplacer(`"`, `\"`, "`", "\\`").Replace(v) + `"`
	}
	return shellQuote(k + ": " + v)
}

// shellQuote quotes s for a POSIX shell, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
