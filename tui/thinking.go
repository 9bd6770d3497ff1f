package tui

import (
	"fmt"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// A reasoning model's thinking, shown as it happens.

// thinking marks t THINKING for call callID: reasoning streams, no text yet.
func (p *targetsPane) thinking(t stream.Target, callID string) {
	s := p.get(t)
	if v := s.inflight[callID]; v != "STREAMING" && v != "THINKING" {
		s.setBusy(callID, "THINKING")
		p.invalidate()
	}
}

// fmtElapsed renders a running timer in whole seconds: 0s, 12s, 2m40s.
func fmtElapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(max(d, 0)/time.Second))
	}
	return fmtDur(d.Truncate(time.Second))
}
