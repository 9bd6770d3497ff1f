//go:build linux

package pagetrim

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const page = 4096

// residentOf sums the Rss and Anonymous fields of this process's mappings
// of the file at path, whatever their permissions.
func residentOf(t *testing.T, path string) (rss, anon int64) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		v, isField := field(line)
		if !isField {
			fs := bytes.Fields(line)
			in = len(fs) >= 6 && string(bytes.Join(fs[5:], []byte(" "))) == path
			continue
		}
		switch {
		case in && bytes.HasPrefix(line, []byte("Rss:")):
			rss += v
		case in && bytes.HasPrefix(line, []byte("Anonymous:")):
			anon += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rss, anon
}

// patterned writes a file of n pages, each byte a function of its offset.
func patterned(t *testing.T, n int) (string, []byte) {
	t.Helper()
	want := make([]byte, n*page)
	for i := range want {
		want[i] = byte(i*7 + i/page)
	}
	path := filepath.Join(t.TempDir(), "mapped file")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// mapFile maps the file at path private with prot and unmaps it when the
// test ends.
func mapFile(t *testing.T, path string, prot int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), prot, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(b) })
	return b
}

// touch reads a byte of every page of b.
func touch(b []byte) (sum byte) {
	for i := 0; i < len(b); i += page {
		sum += b[i]
	}
	return sum
}

// A read-only private mapping's resident pages are released, and reading
// it again gives the file's bytes.
func TestReleaseFileDropsResidentPagesAndKeepsTheContent(t *testing.T) {
	const pages = 256 // 1 MiB
	path, want := patterned(t, pages)
	b := mapFile(t, path, syscall.PROT_READ)
	if got, want := touch(b), touch(want); got != want {
		t.Fatalf("the mapping's pages sum to %d, the file's to %d", got, want)
	}
	if rss, _ := residentOf(t, path); rss != pages*page {
		t.Fatalf("before: %d bytes resident, want %d", rss, pages*page)
	}
	got, err := releaseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != pages*page {
		t.Errorf("released %d bytes, want %d", got, pages*page)
	}
	if rss, _ := residentOf(t, path); rss != 0 {
		t.Errorf("after: %d bytes resident, want 0", rss)
	}
	if !bytes.Equal(b, want) {
		t.Error("the mapping's bytes changed")
	}
	if rss, _ := residentOf(t, path); rss != pages*page {
		t.Errorf("read again: %d bytes resident, want %d", rss, pages*page)
	}
	if got, err := releaseFile(path); err != nil || got != pages*page {
		t.Errorf("second release: %d bytes, %v; want %d", got, err, pages*page)
	}
}

// Pages written to (copied on write) are never released, in a writable
// mapping or in one made read-only after the write (as the dynamic
// loader's relocated read-only data is): releasing them would put the
// file's bytes back in their place.
func TestReleaseFileKeepsCopiedPages(t *testing.T) {
	const pages = 16
	path, want := patterned(t, pages)
	rw := mapFile(t, path, syscall.PROT_READ|syscall.PROT_WRITE)
	ro := mapFile(t, path, syscall.PROT_READ|syscall.PROT_WRITE)
	for i := 0; i < len(rw); i += page {
		rw[i]++
		ro[i] += 2
	}
	if err := syscall.Mprotect(ro, syscall.PROT_READ); err != nil {
		t.Fatal(err)
	}
	rss, anon := residentOf(t, path)
	if anon != 2*pages*page {
		t.Fatalf("before: %d bytes copied on write (%d resident), want %d", anon, rss, 2*pages*page)
	}
	got, err := releaseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Errorf("released %d bytes, want 0", got)
	}
	for i := range want {
		d := byte(0)
		if i%page == 0 {
			d = 1
		}
		if rw[i] != want[i]+d || ro[i] != want[i]+2*d {
			t.Fatalf("byte %d: %d and %d, want %d and %d", i, rw[i], ro[i], want[i]+d, want[i]+2*d)
		}
	}
}

// A shared mapping, a file of another name and a mapping with nothing
// resident are left alone; a path with spaces is matched whole.
func TestCleanSpans(t *testing.T) {
	const smaps = `00400000-00500000 r-xp 00000000 fd:00 12 /bin/lim scope
Size:               1024 kB
Rss:                 512 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00500000-00600000 r--p 00100000 fd:00 12 /bin/lim scope
Rss:                 256 kB
Anonymous:             4 kB
00600000-00700000 r--p 00200000 fd:00 12 /bin/lim scope
Rss:                 128 kB
Anonymous:             0 kB
00700000-00800000 rw-p 00300000 fd:00 12 /bin/lim scope
Rss:                  64 kB
Anonymous:             0 kB
00800000-00900000 r--s 00000000 fd:00 13 /bin/lim scope
Rss:                  64 kB
Anonymous:             0 kB
00900000-00a00000 r--p 00000000 fd:00 14 /bin/lim
Rss:                  64 kB
Anonymous:             0 kB
00a00000-00b00000 r--p 00300000 fd:00 12 /bin/lim scope
Rss:                   0 kB
Anonymous:             0 kB
00b00000-00c00000 r--p 00300000 fd:00 12 /bin/lim scope
Rss:                  32 kB
`
	got, err := cleanSpans(strings.NewReader(smaps), "/bin/lim scope")
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{0x400000, 0x500000, 512 << 10}, {0x600000, 0x700000, 128 << 10}}
	if len(got) != len(want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The test binary's own start-up pages are released, and it runs on.
func TestReleaseExecutable(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := residentOf(t, exe)
	got, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	after, anon := residentOf(t, exe)
	t.Logf("%s: %d KiB resident, %d KiB released, %d KiB after", exe, before>>10, got>>10, after>>10)
	if got <= 0 || got > before {
		t.Errorf("released %d bytes of %d resident", got, before)
	}
	if after >= before {
		t.Errorf("%d bytes resident after, %d before", after, before)
	}
	if anon > 1<<20 {
		t.Errorf("%d bytes of the executable copied on write", anon)
	}
}
