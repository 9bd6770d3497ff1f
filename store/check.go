package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
)

// bbolt's on-disk layout, as far as checkFile needs it: a 16-byte page
// header (id, flags, count, overflow), and the meta page's fields after it.
const (
	pageHeader    = 16
	metaMagic     = 0xED0CDAED
	metaVersion   = 2
	flagBranch    = 0x01
	flagLeaf      = 0x02
	flagMeta      = 0x04
	flagFreelist  = 0x10
	noFreelist    = ^uint64(0)
	maxPageSize   = 64 << 10
	minPageSize   = 1 << 10
	metaSumOffset = 56 // the checksum covers the meta's first 56 bytes
)

// boltMeta is one parsed meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // the high-water mark: pages in use
	txid     uint64
	valid    bool
}

func parseMeta(page []byte) boltMeta {
	var m boltMeta
	if len(page) < pageHeader+metaSumOffset+8 {
		return m
	}
	b := page[pageHeader:]
	le := binary.LittleEndian
	m.pageSize = le.Uint32(b[8:])
	m.root = le.Uint64(b[16:])
	m.freelist = le.Uint64(b[32:])
	m.hwm = le.Uint64(b[40:])
	m.txid = le.Uint64(b[48:])
	h := fnv.New64a()
	_, _ = h.Write(b[:metaSumOffset])
	m.valid = le.Uint32(b) == metaMagic && le.Uint32(b[4:]) == metaVersion && le.Uint64(b[metaSumOffset:]) == h.Sum64()
	return m
}

// checkFile checks, with plain reads and before bbolt maps the file, what
// bbolt would trust blindly: the meta page it will use (the valid one of the
// higher transaction), that its root and free-list pages lie inside the file
// and have the right type, and that the free list's ids are in range. A file
// that fails is corrupt: mapping it could fault, or allocate without bound.
// A missing or empty file passes (bbolt creates it).
func checkFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	head := make([]byte, min(size, 2*maxPageSize))
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("read meta pages: %w", err)
	}
	// The page size, as bbolt finds it: from the first meta page, else the
	// second one at every candidate offset.
	ps := 0
	if m := parseMeta(head); m.valid {
		ps = int(m.pageSize)
	} else {
		for cand := minPageSize; cand <= maxPageSize && cand+pageHeader+64 <= len(head); cand <<= 1 {
			if m := parseMeta(head[cand:]); m.valid && int(m.pageSize) == cand {
				ps = cand
				break
			}
		}
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return errors.New("no valid meta page")
	}
	if int64(2*ps) > size {
		return fmt.Errorf("file of %d bytes is shorter than its two meta pages", size)
	}
	m0 := parseMeta(head[:ps])
	m1 := parseMeta(head[ps : 2*ps])
	a, b := m0, m1
	if m1.txid > m0.txid {
		a, b = m1, m0
	}
	m := a
	if !a.valid {
		m = b
	}
	if !m.valid {
		return errors.New("no valid meta page")
	}
	if int(m.pageSize) != ps {
		return fmt.Errorf("meta pages disagree on the page size (%d, %d)", ps, m.pageSize)
	}
	pages := uint64(size) / uint64(ps)
	if m.hwm < 2 || m.hwm > pages {
		return fmt.Errorf("meta page says %d pages, the file holds %d", m.hwm, pages)
	}
	readPage := func(id uint64) (hdr []byte, err error) {
		hdr = make([]byte, pageHeader)
		if _, err := f.ReadAt(hdr, int64(id)*int64(ps)); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
		if got := binary.LittleEndian.Uint64(hdr); got != id {
			return nil, fmt.Errorf("page %d has id %d", id, got)
		}
		return hdr, nil
	}
	if m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("root page %d outside the file's %d pages", m.root, m.hwm)
	}
	hdr, err := readPage(m.root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if fl := binary.LittleEndian.Uint16(hdr[8:]); fl != flagBranch && fl != flagLeaf {
		return fmt.Errorf("root page %d has type %#x", m.root, fl)
	}
	if ov := uint64(binary.LittleEndian.Uint32(hdr[12:])); m.root+ov >= m.hwm {
		return fmt.Errorf("root page %d overflows the file", m.root)
	}
	if m.freelist == noFreelist {
		return nil
	}
	if m.freelist < 2 || m.freelist >= m.hwm {
		return fmt.Errorf("free-list page %d outside the file's %d pages", m.freelist, m.hwm)
	}
	hdr, err = readPage(m.freelist)
	if err != nil {
		return fmt.Errorf("free list: %w", err)
	}
	if fl := binary.LittleEndian.Uint16(hdr[8:]); fl != flagFreelist {
		return fmt.Errorf("free-list page %d has type %#x", m.freelist, fl)
	}
	ov := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if m.freelist+ov >= m.hwm {
		return fmt.Errorf("free-list page %d overflows the file", m.freelist)
	}
	room := (1 + ov) * uint64(ps)
	body := make([]byte, room-pageHeader)
	if _, err := f.ReadAt(body, int64(m.freelist)*int64(ps)+pageHeader); err != nil {
		return fmt.Errorf("free list: %w", err)
	}
	count, idx := uint64(binary.LittleEndian.Uint16(hdr[10:])), uint64(0)
	if count == 0xFFFF {
		count, idx = binary.LittleEndian.Uint64(body), 1
	}
	if count > (room-pageHeader)/8-idx {
		return fmt.Errorf("free list of %d ids does not fit its %d pages", count, 1+ov)
	}
	for i := idx; i < idx+count; i++ {
		if id := binary.LittleEndian.Uint64(body[i*8:]); id < 2 || id >= m.hwm {
			return fmt.Errorf("free list names page %d, outside the file's %d pages", id, m.hwm)
		}
	}
	return nil
}

// faultSafe runs fn with memory faults turned into panics (a damaged page
// can point bbolt outside the mapped file: without this the process dies
// with "fatal error: fault"), and restores the goroutine's setting after.
// The caller recovers the panic.
func faultSafe[T any](fn func() T) T {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	return fn()
}
