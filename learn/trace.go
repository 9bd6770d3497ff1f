package learn

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// maxTrace bounds the outcomes a trace keeps per provider (32 bytes each);
// the simulator answers past them from the statistical model.
const maxTrace = 100_000

// traceRec is one recorded outcome, compact: times in milliseconds.
type traceRec struct {
	at    int64 // Unix ms
	reset int64 // a quota stop's reset, ms after at (0: none)
	ra    int32 // the delay asked for, ms (-1: none)
	ttft  int32 // ms
	tps   float32
	kind  uint8 // index in traceKinds
	code  uint8 // index in the provider's codes (0: none)
}

// traceKinds are the outcomes a trace names.
var traceKinds = append([]string{"ok", "spend_cap", "daily_quota"}, faultKinds...)

// Trace makes Write add each provider's outcomes in order (at most
// maxTrace each) and set the scenario's mode to trace.
func (l *Learner) Trace() { l.trace = true }

func kindIndex(kind string) (uint8, bool) {
	for i, k := range traceKinds {
		if k == kind {
			return uint8(i), true
		}
	}
	return 0, false
}

func clampMS(d time.Duration) int32 {
	return int32(min(int64(math.MaxInt32), max(0, d.Milliseconds())))
}

// record keeps o in the provider's trace.
func (p *provider) record(o obs) {
	kind := o.kind
	if len(kind) > 6 && kind[:6] == "quota:" {
		kind = kind[6:]
	}
	k, ok := kindIndex(kind)
	if !ok {
		return
	}
	if len(p.trace) >= maxTrace {
		p.traceDropped++
		return
	}
	r := traceRec{at: o.t.UnixMilli(), ra: -1, ttft: clampMS(o.ttft), tps: float32(o.tps), kind: k}
	if o.hasDelay {
		r.ra = clampMS(o.retryAfter)
	}
	if !o.reset.IsZero() && o.reset.After(o.t) {
		r.reset = o.reset.Sub(o.t).Milliseconds()
	}
	if o.code != "" {
		r.code = p.codeIndex(o.code)
	}
	p.trace = append(p.trace, r)
}

// codeIndex is code's index in the provider's codes (0: too many codes).
func (p *provider) codeIndex(code string) uint8 {
	for i, c := range p.codes {
		if c == code {
			return uint8(i + 1)
		}
	}
	if len(p.codes) >= 254 {
		return 0
	}
	p.codes = append(p.codes, code)
	return uint8(len(p.codes))
}

func (l *Learner) writeTrace(b *bytes.Buffer, p *provider) {
	fmt.Fprintf(b, "# trace: the %d recorded outcomes in order (the n-th request gets the n-th)\n", len(p.trace))
	if p.traceDropped > 0 {
		fmt.Fprintf(b, "# %d later outcomes not kept (at most %d): past the trace the rules above answer\n", p.traceDropped, maxTrace)
	}
	first := l.first.UnixMilli()
	ms := func(n int64) string { return fmtDur(time.Duration(n) * time.Millisecond) }
	for _, r := range p.trace {
		fmt.Fprintf(b, "trace = %s %s", ms(max(0, r.at-first)), traceKinds[r.kind])
		if r.kind == 0 {
			if r.ttft > 0 {
				fmt.Fprintf(b, " ttft=%s", ms(int64(r.ttft)))
			}
			if r.tps > 0 {
				fmt.Fprintf(b, " tps=%s", fmtRate(float64(r.tps)))
			}
		}
		if r.ra >= 0 {
			fmt.Fprintf(b, " retry_after=%s", ms(int64(r.ra)))
		}
		if r.reset > 0 {
			fmt.Fprintf(b, " reset=%s", ms(r.reset))
		}
		if r.code > 0 {
			fmt.Fprintf(b, " code=%s", p.codes[r.code-1])
		}
		b.WriteByte('\n')
	}
}
