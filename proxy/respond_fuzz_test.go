package proxy

import (
	"encoding/json"
	"testing"
)

// appendJSONString writes what encoding/json writes, as JSON: any string
// decodes back to what encoding/json's own encoding decodes to (invalid
// UTF-8 as U+FFFD).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c", "\n\r\t\x00\x1f\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "é\xc3", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString([]byte("x"), s)
		if got[0] != 'x' {
			t.Fatal("the prefix was overwritten")
		}
		var dec string
		if err := json.Unmarshal(got[1:], &dec); err != nil {
			t.Fatalf("%q: not a JSON string: %v (%s)", s, err, got[1:])
		}
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if dec != want {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", s, dec, want)
		}
	})
}
