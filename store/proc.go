package store

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procIdentity names a running process beyond its pid, which the system
// reuses: the boot it runs in and its start time (clock ticks since boot,
// from /proc/PID/stat). Both are empty where /proc is missing.
func procIdentity(pid int) (boot string, start uint64) {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		boot = strings.TrimSpace(string(b))
	}
	return boot, procStart(pid)
}

// procStart is field 22 of /proc/PID/stat, 0 when unknown.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (the state): field 22 is f[19].
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// processGone reports whether the process that wrote session s is surely
// dead: another boot, no such pid, or a pid now used by a process that
// started at another time. A session without a pid is never judged gone.
func processGone(s *Session, boot string) bool {
	if s.PID <= 0 {
		return false
	}
	if s.Boot != "" && boot != "" && s.Boot != boot {
		return true
	}
	if err := syscall.Kill(s.PID, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if s.ProcStart != 0 {
		if now := procStart(s.PID); now != 0 && now != s.ProcStart {
			return true
		}
	}
	return false
}
