package probe

import "testing"

// FuzzMessageLimit: any 429 message gives a positive limit or none, never
// a panic.
func FuzzMessageLimit(f *testing.F) {
	for _, s := range []string{"limit: 10, model: x", "Limit 20, Used 20", "(actual/limit): 13/12", "limit: 99999999999999999999", "limit:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if n, ok := messageLimit(msg); ok && n <= 0 {
			t.Fatalf("%q: limit %d", msg, n)
		}
	})
}

func TestMessageLimit(t *testing.T) {
	for msg, want := range map[string]int{
		"Quota exceeded for metric: x, limit: 10, model: m": 10,
		"on requests per min (RPM): Limit 20, Used 20":      20,
		"Requests per Minute (actual/limit): 13/12.":        12,
		"Rate limit exceeded":                               0,
	} {
		if n, _ := messageLimit(msg); n != want {
			t.Errorf("%q: %d, want %d", msg, n, want)
		}
	}
}
