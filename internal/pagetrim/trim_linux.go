//go:build linux

package pagetrim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// releaseExecutable drops this process's mappings of the pages of its own
// executable that are read-only and unmodified (see ReleaseExecutable).
func releaseExecutable() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("finding the executable: %w", err)
	}
	return releaseFile(exe)
}

// releaseFile drops this process's mappings of the resident pages of the
// file at path (as /proc/self/maps names it) that are mapped private and
// read-only and hold no page copied on write, and returns their size.
func releaseFile(path string) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	defer f.Close()
	spans, err := cleanSpans(f, path)
	if err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	var released int64
	for _, s := range spans {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s.start, s.end-s.start, syscall.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("releasing %#x-%#x of %s: %w", s.start, s.end, path, errno)
		}
		released += s.rss
	}
	return released, nil
}

// span is one mapping: its address range and the bytes of it resident.
type span struct {
	start, end uintptr
	rss        int64
}

// cleanSpans reads an smaps listing and returns the mappings of the file
// at path that are private, not writable, and hold no anonymous (copied on
// write) page: each page of them is the file's own, read again from the
// page cache when touched.
func cleanSpans(r io.Reader, path string) ([]span, error) {
	var out []span
	var cur span
	ok := false // cur is a read-only private mapping of path
	anon := int64(-1)
	flush := func() {
		if ok && anon == 0 && cur.rss > 0 {
			out = append(out, cur)
		}
		ok, anon = false, -1
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if v, isField := field(line); isField {
			switch {
			case bytes.HasPrefix(line, []byte("Rss:")):
				cur.rss = v
			case bytes.HasPrefix(line, []byte("Anonymous:")):
				anon = v
			}
			continue
		}
		flush()
		cur, ok = parseHeader(line, path)
	}
	flush()
	return out, sc.Err()
}

// field parses an smaps field line ("Rss:   1234 kB") into bytes; it
// reports false for a mapping's header line.
func field(line []byte) (int64, bool) {
	name, rest, found := bytes.Cut(line, []byte(":"))
	if !found || bytes.ContainsAny(name, " -") {
		return 0, false
	}
	fs := bytes.Fields(rest)
	if len(fs) == 0 {
		return 0, true
	}
	n, err := strconv.ParseInt(string(fs[0]), 10, 64)
	if err != nil {
		return 0, true
	}
	if len(fs) > 1 && string(fs[1]) == "kB" {
		n <<= 10
	}
	return n, true
}

// parseHeader parses a mapping's header line ("start-end perms offset dev
// inode path") and reports whether it maps path private and read-only.
func parseHeader(line []byte, path string) (span, bool) {
	fs := bytes.Fields(line)
	if len(fs) < 6 {
		return span{}, false
	}
	lo, hi, found := bytes.Cut(fs[0], []byte("-"))
	if !found {
		return span{}, false
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return span{}, false
	}
	perms := fs[1]
	if len(perms) != 4 || perms[1] != '-' || perms[3] != 'p' {
		return span{}, false
	}
	// The path is the rest of the line after the inode (it may hold spaces).
	if string(bytes.Join(fs[5:], []byte(" "))) != path {
		return span{}, false
	}
	return span{start: uintptr(start), end: uintptr(end)}, true
}
