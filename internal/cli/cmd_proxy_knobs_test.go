package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A bad value for any of the proxy's limits (0, negative, not a number),
// as a flag or in the config file, is one line naming the knob, and the
// proxy does not start.
func TestProxyKnobErrorsNameTheKnob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgFile := func(doc string) string {
		p := filepath.Join(t.TempDir(), "proxy.json")
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		args []string
		knob string
	}{
		{[]string{"--max-in-flight", "0"}, "max-in-flight"},
		{[]string{"--max-in-flight", "-3"}, "max-in-flight"},
		{[]string{"--max-in-flight", "many"}, "max-in-flight"},
		{[]string{"--max-concurrency", "0"}, "max-concurrency"},
		{[]string{"--max-concurrency", "x"}, "max-concurrency"},
		{[]string{"--write-timeout", "0s"}, "write-timeout"},
		{[]string{"--write-timeout", "-1s"}, "write-timeout"},
		{[]string{"--write-timeout", "soon"}, "write-timeout"},
		{[]string{"--stream-buffer", "0"}, "stream-buffer"},
		{[]string{"--max-queued", "-1"}, "max-queued"},
		{[]string{"--max-answer", "0"}, "max-answer"},
		{[]string{"--config", cfgFile(`{"max_in_flight": 0}`)}, "max_in_flight"},
		{[]string{"--config", cfgFile(`{"max_in_flight": "lots"}`)}, "max_in_flight"},
		{[]string{"--config", cfgFile(`{"max_concurrency": -5}`)}, "max_concurrency"},
		{[]string{"--config", cfgFile(`{"targets": {"openai": {"max_concurrency": 0}}}`)}, "targets.openai.max_concurrency"},
		{[]string{"--config", cfgFile(`{"write_timeout": "0s"}`)}, "write_timeout"},
		{[]string{"--config", cfgFile(`{"stream_buffer": 0}`)}, "stream_buffer"},
		{[]string{"--config", cfgFile(`{"max_queued": -1}`)}, "max_queued"},
		{[]string{"--config", cfgFile(`{"max_answer": 0}`)}, "max_answer"},
		{[]string{"--config", cfgFile(`{"aliases": {"fast": {"chain": ["openai/gpt-5.4-mini"], "max_in_flight": 0}}}`)}, "aliases.fast.max_in_flight"},
	} {
		errOut := &lockedBuffer{}
		env := isolatedEnv(t, map[string]string{"XDG_CONFIG_HOME": dir})
		a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: errOut, getenv: getenvOf(env), now: time.Now}
		code := runProxy(context.Background(), a, append([]string{"--listen", "127.0.0.1:0", "--sim"}, c.args...))
		msg := errOut.String()
		if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.knob) {
			t.Errorf("%v: exit %d, stderr %q: want one line naming %s", c.args, code, msg, c.knob)
		}
	}
}
