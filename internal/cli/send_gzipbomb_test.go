package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/store"
)

// gzipBomb is a 200 event stream that decodes to n bytes of keep-alive
// comments (each one a valid SSE line, so only the size cap can end it).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	block := bytes.Repeat([]byte(": keep-alive\n\n"), 1<<16)
	for written := 0; written < n; written += len(block) {
		if _, err := zw.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSendGzipBombEndsAtTheDecodedCap: a few hundred KB
// of gzip that decodes to far past the 64 MiB stream cap ends the attempt
// with a size-limit error counted in decoded bytes, is not retried on the
// same target, and the call is in the history.
func TestSendGzipBombEndsAtTheDecodedCap(t *testing.T) {
	clearEnv(t)
	bomb := gzipBomb(t, 80<<20)
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(bomb)
	}))
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "history.db")
	ta := newTestApp(map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": "sk-test-bomb-0123456789abcdef"})
	code := run(context.Background(), ta.app, []string{"send", "--json", "--db", db, "--model", "openai/gpt-5.4-mini", "hi"})
	if code == exitOK {
		t.Fatalf("a gzip bomb answered ok:\n%s", ta.out)
	}
	d := decodeSend(t, ta.out.Bytes())
	if d.Error == nil || !strings.Contains(d.Error.Message, "MaxStreamSize") {
		t.Errorf("error %+v: want the stream size cap named", d.Error)
	}
	if requests != 1 {
		t.Errorf("%d requests: an over-size stream is not retried on the same target", requests)
	}
	if len(bomb) > 2<<20 {
		t.Fatalf("the bomb is %d bytes on the wire: not a bomb", len(bomb))
	}
	calls, err := (&store.Reader{Path: db}).List(context.Background(), store.Filter{})
	if err != nil || len(calls) != 1 || calls[0].Outcome == store.OutcomeRunning {
		t.Fatalf("history after the bomb: %v %+v", err, calls)
	}
}
