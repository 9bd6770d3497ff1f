package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendString writes what json.Marshal writes, for any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "é ü", "<&>", "a\"b\\c\n", "\u2028\u2029", "\xff\xfe", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%q: AppendString wrote %s, json.Marshal %s", s, got[1:], want)
		}
	})
}
