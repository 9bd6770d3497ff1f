package jsonenc

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// AppendString appends s quoted as json.Marshal(s) writes it: as it is
// when nothing in it is escaped (no control byte, quote, backslash, <, >
// or &, no invalid UTF-8, no U+2028 or U+2029), else through json.Marshal.
func AppendString(b []byte, s string) []byte {
	high := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return appendMarshalled(b, s)
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	if high && (!utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029")) {
		return appendMarshalled(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendMarshalled appends json.Marshal(s), which never fails on a string.
func appendMarshalled(b []byte, s string) []byte {
	enc, _ := json.Marshal(s)
	return append(b, enc...)
}
