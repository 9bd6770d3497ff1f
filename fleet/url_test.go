package fleet

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := ParseURL("rediss://user:pw1@cache.example:6380/2", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil || o.Addr != "cache.example:6380" || o.DB != 2 || o.Username != "user" || o.Password != "pw1" {
		t.Fatalf("rediss URL: TLS %v addr %s db %d user %s", o.TLSConfig != nil, o.Addr, o.DB, o.Username)
	}
	o, err = ParseURL("redis://127.0.0.1:6379/0", env(map[string]string{"REDISCLI_AUTH": "from-env"}))
	if err != nil || o.Password != "from-env" || o.TLSConfig != nil {
		t.Fatalf("REDISCLI_AUTH: %v %q", err, o.Password)
	}
	o, _ = ParseURL("redis://:in-url@127.0.0.1:6379/0", env(map[string]string{"REDISCLI_AUTH": "from-env"}))
	if o.Password != "in-url" {
		t.Fatalf("the URL's password should win over REDISCLI_AUTH, got %q", o.Password)
	}
	for _, bad := range []string{"http://:pw-secret@h/0", "redis://:pw-secret@h:1/x", "redis://:pw-secret@[::1", "pw-secret"} {
		_, err := ParseURL(bad, env(nil))
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
	if r := Redact("redis://u:pw-secret@h:1/0"); strings.Contains(r, "pw-secret") || !strings.Contains(r, "h:1") {
		t.Errorf("Redact: %q", r)
	}
}

// FuzzParseURL: no --state value panics ParseURL or Redact, and neither
// ever shows the URL's password. Shown means the password's text is in the
// output only because it is the password: the same URL with another
// password in its place must not show it too (escaping can make it by
// chance, "# 00000" written as "#%2000000" holding "000000").
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://u:p@h:1/2", "redis://:p@[::1", "redis://h/x?dial_timeout=1s", "%zz", ""} {
		f.Add(s, "secret-pw")
	}
	f.Add("# 00000", "000000") // found by the fuzzer: a false alarm of the plain check
	f.Fuzz(func(t *testing.T, host, pw string) {
		const other = "Other-Pw-9"
		if len(pw) < 6 || strings.ContainsAny(pw, "@/:?#%[]") || strings.Contains(host, pw) || strings.Contains(other, pw) {
			return
		}
		raw, alt := "redis://user:"+pw+"@"+host, "redis://user:"+other+"@"+host
		errText := func(raw string) string {
			_, err := ParseURL(raw, func(string) string { return "" })
			if err == nil {
				return ""
			}
			return err.Error()
		}
		if red := Redact(raw); strings.Contains(red, pw) && !strings.Contains(Redact(alt), pw) {
			t.Fatalf("Redact(%q) = %q shows the password", raw, red)
		}
		if e := errText(raw); strings.Contains(e, pw) && !strings.Contains(errText(alt), pw) {
			t.Fatalf("ParseURL(%q): %v shows the password", raw, e)
		}
	})
}

// The shared state's limits can be set in the --state URL's query; a bad
// value is an error naming its knob, and go-redis never sees them.
func TestURLKnobs(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ro, k, err := parseURL("redis://127.0.0.1:6379/0?max_reply=2MiB&max_value=64KiB&patience=5s&timeout=750ms&start_hold=1s&rate_margin=0.05&dial_timeout=2s", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if k.MaxReply != 2<<20 || k.MaxValue != 64<<10 || k.Patience != 5*time.Second || k.Timeout != 750*time.Millisecond ||
		k.StartHold != time.Second || k.RateMargin != 0.05 {
		t.Errorf("knobs %+v", k)
	}
	if ro.DialTimeout != 2*time.Second || ro.DB != 0 {
		t.Errorf("go-redis's own option lost: %+v", ro)
	}
	if _, k, _ := parseURL("redis://127.0.0.1:6379/0?rate_margin=0", env(nil)); k.RateMargin >= 0 {
		t.Errorf("rate_margin=0 must mean no margin, got %v", k.RateMargin)
	}
	for _, c := range []struct{ url, knob string }{
		{"redis://h:1/0?max_reply=lots", "max_reply"},
		{"redis://h:1/0?max_reply=10", "max_reply"},
		{"redis://h:1/0?max_value=-1", "max_value"},
		{"redis://h:1/0?patience=0s", "patience"},
		{"redis://h:1/0?timeout=soon", "timeout"},
		{"redis://h:1/0?start_hold=-1s", "start_hold"},
		{"redis://:pw-secret@h:1/0?rate_margin=0.9", "rate_margin"},
	} {
		_, err := ParseURL(c.url, env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), c.knob+"=") || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%s: %v, want an error naming %s (and no password)", c.url, err, c.knob)
		}
	}
	// Open applies them over the caller's options.
	f, err := Open(context.Background(), "redis://127.0.0.1:1/0?patience=7s&max_reply=4KiB", Options{Patience: time.Second, Warn: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.opt.Patience != 7*time.Second || f.opt.MaxReply != 4<<10 {
		t.Errorf("Open: patience %v, max reply %d; want the URL's 7s and 4KiB", f.opt.Patience, f.opt.MaxReply)
	}
}
