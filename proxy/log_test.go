package proxy

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestLogLineHidesKeysInTheClient: a caller's User-Agent is its own text; a
// key pasted into it never reaches the log.
func TestLogLineHidesKeysInTheClient(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	var lines []string
	e := newEnv(t, nil, func(o *Options) {
		o.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(format, args...))
		}
	})
	const key = "sk-proj-LOGCANARY0123456789abcdef"
	r := e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`)
	r.Header.Set("User-Agent", "evil/1.0 "+key)
	if rep := e.do(r); rep.status != 200 {
		t.Fatalf("status %d: %s", rep.status, rep.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
	}
	if strings.Contains(lines[0], "LOGCANARY") {
		t.Fatalf("the log line carries the key: %q", lines[0])
	}
	if !strings.Contains(lines[0], "evil/1.0") {
		t.Errorf("the client is missing from the log line: %q", lines[0])
	}
}
