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
//
// An AWS endpoint that signs with SigV4 (no Bedrock API key) when keyText
// names a variable becomes curl's own signing, --aws-sigv4, with the
// credentials as references to the AWS variables (and the session token's
// header only when AWS_SESSION_TOKEN is set).
func Curl(ep Endpoint, req Request, keyText string) (string, error) {
	var sigv4 []string
	if p, ok := lookupProvider(ep.Provider); ok && p.SigV4Service != "" && ep.Key == "" && ep.AWS != nil && strings.HasPrefix(keyText, "$") {
		region, _ := BedrockModel(req.Target.Model, ep.Region)
		sigv4 = []string{"--aws-sigv4 " + shellQuote("aws:amz:"+region+":"+p.SigV4Service),
			`--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"`, `${AWS_SESSION_TOKEN:+-H "X-Amz-Security-Token: $AWS_SESSION_TOKEN"}`}
		keyText = ""
	}
	ep.Key, ep.AWS = Secret(keyText), nil
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
	for _, arg := range sigv4 {
		fmt.Fprintf(&b, " \\\n  %s", arg)
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
