package stream

import (
	"mime"
	"net/http"
	"strings"
	"testing"
)

// mediaTypeRef is mediaType as it was, by mime.ParseMediaType.
func mediaTypeRef(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

var mediaTypeCases = []string{"", "text/event-stream", "text/event-stream; charset=utf-8", " Text/Event-Stream ;charset=UTF-8",
	"text/event-stream;;", "text/event-stream; charset", "text/event-stream; a=\"b", "text/html", "application/json; x=1; x=2",
	"text/event stream", "\u00a0text/event-stream\u00a0", "İ/x", ";", "a/b; title*=utf-8''%E2%82%AC"}

// mediaType reads every Content-Type as mime.ParseMediaType did.
func TestMediaTypeMatchesMime(t *testing.T) {
	for _, ct := range mediaTypeCases {
		if got, want := mediaType(http.Header{"Content-Type": {ct}}), mediaTypeRef(ct); got != want {
			t.Errorf("%q: %q, want %q", ct, got, want)
		}
	}
}

// FuzzMediaType: any Content-Type reads as mime.ParseMediaType read it.
func FuzzMediaType(f *testing.F) {
	for _, ct := range mediaTypeCases {
		f.Add(ct)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if got, want := mediaType(http.Header{"Content-Type": {ct}}), mediaTypeRef(ct); got != want {
			t.Fatalf("%q: %q, want %q", ct, got, want)
		}
	})
}
