package proxy

import "testing"

// FuzzParseConfig: any document parses or is refused, never a panic; a
// config that parses has no limit below zero, and every named ceiling and
// alias cap is positive.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"max_in_flight": 10, "max_concurrency": 5, "targets": {"openai": {"max_concurrency": 3}}}`,
		`{"write_timeout": "30s", "stream_buffer": 1024, "max_queued": 4096, "max_answer": 1}`,
		`{"aliases": {"fast": {"chain": ["openai/gpt-5.4-mini"], "max_in_flight": 2}}}`,
		`{"targets": {"anthropic/claude-haiku-5-5": {"max_concurrency": 0}}}`,
		`{"max_in_flight": -1}`,
		`{"write_timeout": 12.5}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		c, err := ParseConfig([]byte(doc))
		if err != nil {
			return
		}
		if c.MaxInFlight < 0 || c.MaxConcurrency < 0 || c.WriteTimeout < 0 || c.StreamBuffer < 0 || c.MaxQueued < 0 || c.MaxAnswer < 0 {
			t.Fatalf("a negative limit parsed: %+v", c)
		}
		for k, v := range c.TargetMax {
			if v <= 0 {
				t.Fatalf("targets.%s: ceiling %d", k, v)
			}
		}
		for n, a := range c.Aliases {
			if a.MaxInFlight < 0 {
				t.Fatalf("alias %s: max_in_flight %d", n, a.MaxInFlight)
			}
		}
	})
}
