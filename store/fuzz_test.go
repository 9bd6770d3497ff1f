package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// fuzzSeedFile writes a small real history: ok, retried, failed over and
// quota-stopped calls, a cooldown, in the current schema.
func fuzzSeedFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "history.db")
	fail := spec{id: "fo", start: t0.Add(time.Minute), chain: []stream.Target{tAnthropic, tGemini},
		classes: []stream.Class{stream.ClassRateLimit, stream.ClassOverload, stream.ClassOK}, outcome: retry.OutcomeOK,
		prompt: "p", text: "t", wait: 2 * time.Second}
	quota := spec{id: "q", start: t0.Add(2 * time.Minute), chain: []stream.Target{tOpenAI}, classes: []stream.Class{stream.ClassQuota}, outcome: retry.OutcomeStopped}
	recordAll(tb, path, SessionInfo{Version: "fuzz", Mode: ModeSimulated, Command: "send"}, okSpec("ok", t0), fail, quota)
	if err := NewCooldowns(path, Options{}).Set(retry.Cooldown{Scope: "account:openai:0123456789ab", Since: t0, Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "m"}); err != nil {
		tb.Fatal(err)
	}
	return path
}

// FuzzDecodeRecords feeds every record decoder (current and schema 1) any
// key and value: each returns a value or an error, never panics, and a
// record that decodes to its end decodes the same way twice.
func FuzzDecodeRecords(f *testing.F) {
	path := fuzzSeedFile(f)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		f.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				f.Add(append([]byte(nil), k...), append([]byte(nil), v...))
				return nil
			})
		})
	})
	_ = db.Close()
	f.Add(make([]byte, keyLen), []byte{SchemaVersion})
	f.Add(make([]byte, keyLen+2), []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		chain := []stream.Target{tOpenAI, tAnthropic}
		if c, rest, err := decodeCallRest(k, v, false); err == nil && rest == 0 {
			c2, err := decodeCall(k, v, false)
			if err != nil || c2.Outcome != c.Outcome || c2.Attempts != c.Attempts || c2.CallID != c.CallID {
				t.Fatalf("decoded twice differently: %+v / %+v (%v)", c, c2, err)
			}
		}
		_, _ = decodeCall(k, v, true)
		var s callStat
		_ = decodeCallStat(k, v, &s)
		_, _ = decodeAttempt(k, v, keyTime(k), chain)
		_, _ = decodeAttempt(k, v, time.Time{}, nil)
		_, _ = decodeSession(k, v)
		_, _ = decodeCooldown(v)
		if len(v) > 0 { // the schema 1 decoders' callers check the version byte first
			_, _ = decodeCallV1(k, v)
			_, _ = decodeAttemptV1(v)
			_, _ = decodeSessionV1(k, v)
		}
		_ = keySeq(k)
		_ = keyTime(k)
	})
}

// FuzzSalvage runs repair's last resort, the raw page reader, on damaged
// copies of a real file: each input overwrites some bytes of the file at an
// offset and may cut it short (small inputs keep the fuzzer fast on a
// 32 KiB file). It finds what it can, keeps only records that decode, and
// never panics or hangs.
func FuzzSalvage(f *testing.F) {
	seed, err := os.ReadFile(fuzzSeedFile(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), []byte{}, uint32(0))
	f.Add(uint32(16+8), []byte{0, 4, 0, 0}, uint32(0))                  // the meta page's page size
	f.Add(uint32(2*4096+8), []byte{2, 0, 0xff, 0xff}, uint32(0))        // a page's flags and count
	f.Add(uint32(2*4096+12), []byte{0xff, 0xff, 0xff, 0x7f}, uint32(0)) // its overflow
	f.Add(uint32(3*4096+16), []byte{0, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff}, uint32(0))
	f.Add(uint32(0), []byte{}, uint32(len(seed)/2+100))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, at uint32, patch []byte, cut uint32) {
		data := append([]byte(nil), seed...)
		if len(patch) > 0 {
			copy(data[int(at%uint32(len(data))):], patch)
		}
		if cut != 0 {
			data = data[:int(cut%uint32(len(data)))]
		}
		p := filepath.Join(dir, "f.db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := salvage(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		// What it keeps decodes.
		for k, v := range out[string(bCalls)] {
			if _, err := decodeCall([]byte(k), v, false); err != nil {
				t.Fatalf("salvaged call %x does not decode: %v", k, err)
			}
		}
		for k, v := range out[string(bAttempts)] {
			if _, err := decodeAttempt([]byte(k), v, keyTime([]byte(k)), nil); err != nil {
				t.Fatalf("salvaged attempt %x does not decode: %v", k, err)
			}
		}
	})
}
