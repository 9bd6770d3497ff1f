package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// recordOrigin records spec s as a call that came with route and client.
func recordOrigin(t *testing.T, path string, info SessionInfo, route, client string, specs ...spec) {
	t.Helper()
	r := NewRecorder(path, info, Options{Retention: -1})
	for _, s := range specs {
		c, evs := s.events()
		c.Route, c.Client = route, client
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestOriginRoundTrip(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("typed", t0))
	recordOrigin(t, path, SessionInfo{Command: "proxy"}, "fast", "OpenAI/Python 1.99.0",
		spec{id: "px", start: t0.Add(time.Minute), chain: []stream.Target{tOpenAI, tAnthropic},
			classes: []stream.Class{stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK, prompt: "p", text: "a", wait: time.Second})
	// RecordCall carries them too, and --no-content keeps them (metadata).
	r := NewRecorder(path, SessionInfo{NoContent: true}, Options{Retention: -1})
	c, evs := okSpec("reg", t0.Add(2*time.Minute), tGemini).events()
	c.Route, c.Client = "gemini/gemini-2.5-flash", "curl/8.5.0"
	r.RecordCall(c)
	for _, ev := range evs {
		r.Record(ev)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rd := &Reader{Path: path}
	ctx := context.Background()

	typed, err := rd.Show(ctx, "typed")
	if err != nil || typed.Route != "" || typed.Client != "" {
		t.Fatalf("typed call %+v %v", typed, err)
	}
	px, err := rd.Show(ctx, "px")
	if err != nil || px.Route != "fast" || px.Client != "OpenAI/Python 1.99.0" || px.Attempts != 2 || px.Text != "a" ||
		px.MaxTokens != 256 || px.Policy != retry.DefaultPolicy() || px.Usage == nil || px.Usage.OutputTokens != 34 {
		t.Fatalf("proxied call %+v %v", px, err)
	}
	reg, err := rd.Show(ctx, "reg")
	if err != nil || reg.Route != "gemini/gemini-2.5-flash" || reg.Client != "curl/8.5.0" || reg.HasPrompt {
		t.Fatalf("registered call %+v %v", reg, err)
	}

	// JSON: present when set, omitted when empty.
	b, _ := json.Marshal(px.ToJSON(false))
	if !bytes.Contains(b, []byte(`"route":"fast","client":"OpenAI/Python 1.99.0"`)) {
		t.Fatalf("json %s", b)
	}
	b, _ = json.Marshal(typed.ToJSON(true))
	if bytes.Contains(b, []byte(`"route"`)) || bytes.Contains(b, []byte(`"client"`)) {
		t.Fatalf("empty route/client not omitted: %s", b)
	}

	// List: summaries leave them out unless asked; filters read them.
	calls, err := rd.List(ctx, Filter{})
	if err != nil || len(calls) != 3 || calls[1].Route != "" || calls[1].Full {
		t.Fatalf("plain list %+v %v", calls, err)
	}
	calls, err = rd.List(ctx, Filter{Origin: true})
	if err != nil || len(calls) != 3 || calls[1].Route != "fast" || calls[1].Client != "OpenAI/Python 1.99.0" ||
		calls[0].Client != "curl/8.5.0" || calls[2].Route != "" || calls[1].Full {
		t.Fatalf("origin list %+v %v", calls, err)
	}
	const wPX, wReg = "fast|OpenAI/Python 1.99.0", "gemini/gemini-2.5-flash|curl/8.5.0"
	ids := func(f Filter) []string {
		t.Helper()
		cs, err := rd.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Route+"|"+c.Client)
		}
		return out
	}
	for _, tc := range []struct {
		f    Filter
		want []string
	}{
		{Filter{Client: "python"}, []string{wPX}},
		{Filter{Client: "CURL"}, []string{wReg}},
		{Filter{Client: "/"}, []string{wReg, wPX}},
		{Filter{Route: "fast"}, []string{wPX}},
		{Filter{Route: "fas"}, nil},
		{Filter{Route: "fast", Client: "curl"}, nil},
		{Filter{Client: "python", Provider: "gemini"}, nil},
		{Filter{Client: "/", Limit: 1}, []string{wReg}},
	} {
		if got := ids(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("list %+v: %v, want %v", tc.f, got, tc.want)
		}
	}
	var each []string
	err = rd.Each(ctx, Filter{Client: "python"}, false, func(c *Call) error {
		each = append(each, c.CallID+" "+c.Route+" "+c.Client)
		return nil
	})
	if err != nil || !reflect.DeepEqual(each, []string{"px fast OpenAI/Python 1.99.0"}) {
		t.Fatalf("each %v %v", each, err)
	}
	st, err := rd.Stats(ctx, Filter{Route: "fast"})
	// Rows: anthropic (served it, as the fallback), openai (its primary), all.
	if err != nil || len(st) != 3 || st[len(st)-1].Calls != 1 || st[1].Provider != "openai" || st[1].Calls != 1 || st[0].Served != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

// A call record as the binary before route and client wrote it (schema 2,
// encoded by that code): it must decode unchanged.
const (
	oldCallKey    = "18e3ea08c47180000000002a"
	oldCallRecord = "0267030180bcc1960b02066f70656e61690c6770742d352e342d6d696e6909616e7468726f70696310636c617564652d6861696b752d342d3501000280a8d6b90780b8b872090470782d310473746f700c220000018004"
)

func oldCall() *Call {
	served := tAnthropic
	return &Call{ID: 42, CallID: "px-1", Session: 3, Started: t0, Ended: t0.Add(1500 * time.Millisecond),
		Outcome: retry.OutcomeOK, Chain: []stream.Target{tOpenAI, tAnthropic}, ServedBy: &served, Attempts: 2,
		Waited: time.Second, TTFT: 120 * time.Millisecond, Classes: []stream.Class{stream.ClassOK, stream.ClassRateLimit},
		Policy: retry.DefaultPolicy(), MaxTokens: 256, FinishReason: "stop",
		Usage: &stream.Usage{InputTokens: 12, OutputTokens: 34}, HasPrompt: true, HasText: true, Full: true}
}

func TestOriginOldRecordStillDecodes(t *testing.T) {
	k, _ := hex.DecodeString(oldCallKey)
	v, _ := hex.DecodeString(oldCallRecord)
	c, rest, err := decodeCallRest(k, v, false)
	if err != nil || rest != 0 {
		t.Fatalf("old record: %v (rest %d)", err, rest)
	}
	if want := oldCall(); !reflect.DeepEqual(c, want) {
		t.Fatalf("old record decoded as\n%+v\nwant\n%+v", c, want)
	}
	// A call without route or client is written byte for byte as before.
	want := oldCall()
	want.Full = false
	if got := encodeCall(want); !bytes.Equal(got, v) {
		t.Fatalf("encoding changed:\n%x\n%x", got, v)
	}

	// With them, the record is the old one plus a flag and a tail: a reader
	// that predates them decodes every field it knows and ignores the rest.
	withOrigin := oldCall()
	withOrigin.Route, withOrigin.Client = "fast", "OpenAI/Python 1.99.0"
	nv := encodeCall(withOrigin)
	if nv[0] != SchemaVersion || nv[1] != v[1]|cfOrigin || !bytes.Equal(nv[2:len(v)], v[2:]) {
		t.Fatalf("new record is not the old one plus a tail:\n%x\n%x", nv, v)
	}
	nc, rest, err := decodeCallRest(k, nv, false)
	if err != nil || rest != 0 || nc.Route != "fast" || nc.Client != "OpenAI/Python 1.99.0" {
		t.Fatalf("new record %+v %v (rest %d)", nc, err, rest)
	}
	nc.Route, nc.Client = "", ""
	if !reflect.DeepEqual(nc, oldCall()) {
		t.Fatalf("new record's other fields %+v", nc)
	}
	if s, err := decodeCall(k, nv, true); err != nil || s.Attempts != 2 || s.Route != "" {
		t.Fatalf("summary %+v %v", s, err)
	}
	var cs callStat
	if err := decodeCallStat(k, nv, &cs); err != nil || cs.attempts != 2 || string(cs.provider) != "openai" {
		t.Fatalf("stat %+v %v", cs, err)
	}
	// A truncated tail is an error, not a silent empty client.
	if _, err := decodeCall(k, nv[:len(nv)-3], false); err == nil {
		t.Fatal("truncated tail decoded")
	}
}

func TestOriginOldRecordInAFile(t *testing.T) {
	path := tempDB(t)
	recordOrigin(t, path, SessionInfo{}, "fast", "curl/8.5.0", okSpec("new", t0.Add(time.Hour)))
	k, _ := hex.DecodeString(oldCallKey)
	v, _ := hex.DecodeString(oldCallRecord)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bCalls).Put(k, v); err != nil {
			return err
		}
		return tx.Bucket(bIDs).Put(seqKey(42), k)
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	rd := &Reader{Path: path}
	calls, err := rd.List(context.Background(), Filter{Origin: true})
	if err != nil || len(calls) != 2 || calls[0].Client != "curl/8.5.0" || calls[1].ID != 42 || calls[1].Client != "" || calls[1].Attempts != 2 {
		t.Fatalf("list %+v %v", calls, err)
	}
	c, err := rd.Show(context.Background(), "42")
	if err != nil || c.CallID != "px-1" || c.Route != "" || c.ServedBy.Model != tAnthropic.Model {
		t.Fatalf("show %+v %v", c, err)
	}
	if calls, err := rd.List(context.Background(), Filter{Client: "curl"}); err != nil || len(calls) != 1 || calls[0].ID == 42 {
		t.Fatalf("filter %+v %v", calls, err)
	}
	// Repair's salvage recognises both shapes as call records.
	for _, rec := range [][]byte{v, encodeCall(&Call{Started: t0, Route: "r", Client: "c", Outcome: OutcomeRunning})} {
		got := map[string][]byte{}
		classify(k, rec, func(b string, k, v []byte, _ func([]byte) bool) {
			if b == string(bCalls) {
				got[string(k)] = v
			}
		}, nil)
		if len(got) != 1 {
			t.Fatalf("salvage did not take %x as a call", rec)
		}
	}
}

func TestOriginNeverStoresACredential(t *testing.T) {
	clearEnv(t)
	const key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	const token = "lsp-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	client := "evil/1.0 (" + key + ") Bearer abcdefghijklmnopqrstuvwx " + token + "\x1b]0;title\x07\r\n\tx\u202e" +
		strings.Repeat("é", 400)
	path := tempDB(t)
	recordOrigin(t, path, SessionInfo{}, "openai/"+key, client, okSpec("px", t0))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{key, token, "abcdefghijklmnopqrstuvwx", "\x1b]0;", "0123456789abcdef0123"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Fatalf("the file holds %q", s)
		}
	}
	c, err := (&Reader{Path: path}).Show(context.Background(), "px")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Client, "evil/1.0 ([redacted]) [redacted] [redacted] xé") ||
		len(c.Client) > MaxOriginLen || !utf8.ValidString(c.Client) || strings.ContainsAny(c.Client, "\x1b\x07\r\n\t\u202e") {
		t.Fatalf("client %q (%d bytes)", c.Client, len(c.Client))
	}
	if c.Route != "openai/[redacted]" {
		t.Fatalf("route %q", c.Route)
	}
}

func TestCleanOrigin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"OpenAI/Python 1.99.0", "OpenAI/Python 1.99.0"},
		{"  a \t\n b  ", "a b"},
		{"a\x00b\x7fc\u200bd\u0085e\u2028f", "abcde f"},
		{"x\x1b[2J\x1b]0;title\x07y", "xy"},
		{"bad\xffutf8", "bad\ufffdutf8"},
		{"Anthropic/Go xai-abcdefghijklmnopqrstu", "Anthropic/Go [redacted]"},
		{strings.Repeat("x", 300), strings.Repeat("x", MaxOriginLen)},
		{strings.Repeat("x", MaxOriginLen-1) + "é", strings.Repeat("x", MaxOriginLen-1)},
		{strings.Repeat("x", MaxOriginLen-1) + " y", strings.Repeat("x", MaxOriginLen-1)},
	} {
		if got := cleanOrigin(tc.in); got != tc.want {
			t.Errorf("cleanOrigin(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
