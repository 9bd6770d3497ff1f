//go:build unix

package tui

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system): a
// benchmark's cost that a loaded machine does not inflate, unlike wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
