package sim

import (
	"strings"
	"testing"
	"time"
)

func TestParseTrace(t *testing.T) {
	s, err := parseScenario("x", strings.NewReader("mode = trace\n[openai]\ntrace = 0s ok ttft=300ms tps=55\ntrace = 1.5s rate_limit retry_after=2s\ntrace = 3s spend_cap reset=1h code=insufficient_quota\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != modeTrace {
		t.Errorf("mode %q", s.Mode)
	}
	tr := s.Providers["openai"].Trace
	want := []traceStep{{At: 0, Kind: "ok", TTFT: 300 * time.Millisecond, TPS: 55}, {At: 1500 * time.Millisecond, Kind: FaultRateLimit, RetryAfter: 2 * time.Second},
		{At: 3 * time.Second, Kind: FaultSpendCap, Reset: time.Hour, Code: "insufficient_quota"}}
	if len(tr) != len(want) {
		t.Fatalf("trace %+v", tr)
	}
	for i := range want {
		if tr[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, tr[i], want[i])
		}
	}
	for _, bad := range []string{
		"mode = replay\n",
		"[openai]\ntrace = 2s ok\ntrace = 1s ok\n",
		"[openai]\ntrace = 1s failover-demo\n",
		"[openai]\ntrace = 1s nonsense\n",
		"[openai]\ntrace = 1s\n",
		"[openai]\ntrace = 1s ok tps=0\n",
		"[openai]\ntrace = 1s ok color=red\n",
		"[openai]\ntrace = -1s ok\n",
	} {
		if _, err := parseScenario("x", strings.NewReader(bad), "bad.ini"); err == nil || !strings.HasPrefix(err.Error(), "bad.ini:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Without mode = trace the steps are kept but not replayed.
	srv := &Server{scen: &scenario{}}
	st := &provState{cfg: s.Providers["openai"]}
	if _, ok := srv.nextTrace(st); ok {
		t.Error("a statistical scenario replayed its trace")
	}
	srv.scen.Mode = modeTrace
	for i := range want {
		step, ok := srv.nextTrace(st)
		if !ok || step != want[i] {
			t.Errorf("next %d: %+v %v", i, step, ok)
		}
	}
	if _, ok := srv.nextTrace(st); ok {
		t.Error("a used-up trace went on")
	}
}

// Any trace step text parses or fails with a message; never a panic.
func FuzzParseTraceStep(f *testing.F) {
	for _, s := range []string{"0s ok", "1s ok ttft=1ms tps=3", "2s rate_limit retry_after=1s", "3s spend_cap reset=1h code=x", "1s ok tps=NaN", "x y z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		st, err := parseTraceStep(text)
		if err != nil {
			return
		}
		if st.At < 0 || st.RetryAfter < 0 || st.Reset < 0 || st.TTFT < 0 || st.TPS < 0 || st.TPS != st.TPS {
			t.Fatalf("%q parsed to %+v", text, st)
		}
	})
}
