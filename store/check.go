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
	_, err := inspectFile(path)
	return err
}

// inspectFile is checkFile that also returns the meta page bbolt will use
// (zero for a missing or empty file).
func inspectFile(path string) (boltMeta, error) {
	var none boltMeta
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return none, nil
		}
		return none, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return none, err
	}
	size := fi.Size()
	if size == 0 {
		return none, nil
	}
	head := make([]byte, min(size, 2*maxPageSize))
	if _, err := io.ReadFull(f, head); err != nil {
		return none, fmt.Errorf("read meta pages: %w", err)
	}
	m, ps, err := chooseMeta(head, size)
	if err != nil {
		return none, err
	}
	if err := checkRoot(f, m, ps); err != nil {
		return none, err
	}
	if m.freelist == noFreelist {
		return m, nil
	}
	if err := checkFreelist(f, m, ps); err != nil {
		return none, err
	}
	return m, nil
}

// chooseMeta finds the page size in head (the file's first two pages at
// most) and the meta page bbolt will use, and checks it against the
// file's size.
func chooseMeta(head []byte, size int64) (boltMeta, int, error) {
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
		return boltMeta{}, 0, errors.New("no valid meta page")
	}
	if int64(2*ps) > size {
		return boltMeta{}, 0, fmt.Errorf("file of %d bytes is shorter than its two meta pages", size)
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
		return boltMeta{}, 0, errors.New("no valid meta page")
	}
	if int(m.pageSize) != ps {
		return boltMeta{}, 0, fmt.Errorf("meta pages disagree on the page size (%d, %d)", ps, m.pageSize)
	}
	pages := uint64(size) / uint64(ps)
	if m.hwm < 2 || m.hwm > pages {
		return boltMeta{}, 0, fmt.Errorf("meta page says %d pages, the file holds %d", m.hwm, pages)
	}
	return m, ps, nil
}

// readPageHeader reads the header of page id (of ps bytes) and checks
// that it names its own id.
func readPageHeader(f *os.File, id uint64, ps int) ([]byte, error) {
	hdr := make([]byte, pageHeader)
	if _, err := f.ReadAt(hdr, int64(id)*int64(ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d has id %d", id, got)
	}
	return hdr, nil
}

// checkRoot checks that m's root page is in the file, a branch or a leaf,
// and does not overflow it.
func checkRoot(f *os.File, m boltMeta, ps int) error {
	if m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("root page %d outside the file's %d pages", m.root, m.hwm)
	}
	hdr, err := readPageHeader(f, m.root, ps)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if fl := binary.LittleEndian.Uint16(hdr[8:]); fl != flagBranch && fl != flagLeaf {
		return fmt.Errorf("root page %d has type %#x", m.root, fl)
	}
	if ov := uint64(binary.LittleEndian.Uint32(hdr[12:])); m.root+ov >= m.hwm {
		return fmt.Errorf("root page %d overflows the file", m.root)
	}
	return nil
}

// checkFreelist checks that m's free-list page is in the file, is one,
// holds the ids it counts, and names only pages in the file.
func checkFreelist(f *os.File, m boltMeta, ps int) error {
	if m.freelist < 2 || m.freelist >= m.hwm {
		return fmt.Errorf("free-list page %d outside the file's %d pages", m.freelist, m.hwm)
	}
	hdr, err := readPageHeader(f, m.freelist, ps)
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

// treeCheckMax is the largest file whose every tree checkOpen walks: about
// 6 ms for 4 MiB (130 ms for a 90 MiB file, too slow for every open).
// Repair walks every tree of any file.
const treeCheckMax = 4 << 20

// checkOpen is what an open checks: checkFile, and for a small file every
// tree's links (checkAllTrees), unless trees is false (a file this process
// wrote last and nobody changed since: see fileStamp).
func checkOpen(path string, trees bool) error {
	m, err := inspectFile(path)
	if err != nil || !trees || m.hwm == 0 || int64(m.hwm)*int64(m.pageSize) > treeCheckMax {
		return err
	}
	return checkAllTrees(path, m)
}

// checkTree walks the branch pages of the tree rooted at root with plain
// reads: every page inside the file, with its own id, of a tree type, seen
// once, at most 64 deep. bbolt trusts these links: a damaged one can send
// its cursor round a cycle for ever.
func checkTree(path string, m boltMeta, root uint64) error {
	if root == 0 {
		return nil // an inline bucket
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ps := int64(m.pageSize)
	seen := map[uint64]bool{}
	type item struct {
		id    uint64
		depth int
	}
	stack := []item{{root, 0}}
	hdr := make([]byte, pageHeader)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.id < 2 || it.id >= m.hwm || seen[it.id] || it.depth > 64 {
			return fmt.Errorf("page %d: a link out of the file, a cycle or too deep", it.id)
		}
		seen[it.id] = true
		if _, err := f.ReadAt(hdr, int64(it.id)*ps); err != nil {
			return fmt.Errorf("page %d: %w", it.id, err)
		}
		le := binary.LittleEndian
		if le.Uint64(hdr) != it.id {
			return fmt.Errorf("page %d has id %d", it.id, le.Uint64(hdr))
		}
		typ, count, ov := le.Uint16(hdr[8:]), int(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
		if typ != flagLeaf && typ != flagBranch {
			return fmt.Errorf("page %d has type %#x", it.id, typ)
		}
		if it.id+ov >= m.hwm {
			return fmt.Errorf("page %d overflows the file", it.id)
		}
		page := make([]byte, ps*int64(1+ov))
		if _, err := f.ReadAt(page, int64(it.id)*ps); err != nil {
			return fmt.Errorf("page %d: %w", it.id, err)
		}
		if err := checkElements(page); err != nil {
			return fmt.Errorf("page %d: %w", it.id, err)
		}
		if typ == flagLeaf {
			continue
		}
		for i := range count {
			stack = append(stack, item{le.Uint64(page[pageHeader+i*16+8:]), it.depth + 1})
		}
	}
	return nil
}

// checkElements checks that a leaf or branch page's element table, and
// every key and value it points at, lie inside the page: bbolt makes slices
// from these offsets without a check, and a wild one can point into Go's
// own heap.
func checkElements(page []byte) error {
	le := binary.LittleEndian
	typ, count := le.Uint16(page[8:]), int(le.Uint16(page[10:]))
	if count == 0 && typ == flagBranch {
		return errors.New("empty branch page") // bbolt would read its first element anyway
	}
	if pageHeader+count*16 > len(page) {
		return fmt.Errorf("%d elements do not fit", count)
	}
	for i := range count {
		el := pageHeader + i*16
		var end uint64
		if typ == flagLeaf {
			end = uint64(el) + uint64(le.Uint32(page[el+4:])) + uint64(le.Uint32(page[el+8:])) + uint64(le.Uint32(page[el+12:]))
		} else {
			end = uint64(el) + uint64(le.Uint32(page[el:])) + uint64(le.Uint32(page[el+4:]))
		}
		if end > uint64(len(page)) {
			return fmt.Errorf("element %d points outside the page", i)
		}
	}
	return nil
}

// checkAllTrees runs checkTree on the root tree and on the tree of every
// bucket in it, and returns the first problem.
func checkAllTrees(path string, m boltMeta) error {
	per, rootErr := checkBucketTrees(path, m)
	if rootErr != nil {
		return rootErr
	}
	for name, err := range per {
		return fmt.Errorf("bucket %q: %w", name, err)
	}
	return nil
}

// checkBucketTrees checks the root tree, then each bucket's tree (a
// bucket's header is its root page and sequence; root 0 is an inline
// bucket, whose one leaf page follows the header), and returns the root
// tree's problem and each damaged bucket's.
func checkBucketTrees(path string, m boltMeta) (per map[string]error, rootErr error) {
	per = map[string]error{}
	if err := checkTree(path, m, m.root); err != nil {
		return per, err
	}
	f, err := os.Open(path)
	if err != nil {
		return per, err
	}
	defer f.Close()
	ps := int64(m.pageSize)
	// The root tree of a limitscope file is one leaf (a few buckets).
	hdr := make([]byte, ps)
	if _, err := f.ReadAt(hdr, int64(m.root)*ps); err != nil {
		return per, fmt.Errorf("root page: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(hdr[8:]) != flagLeaf || le.Uint32(hdr[12:]) != 0 {
		return per, nil // a larger root tree: checked above, its buckets are not
	}
	count := int(le.Uint16(hdr[10:]))
	for i := range count {
		el := pageHeader + i*16
		if el+16 > len(hdr) {
			return per, errors.New("root page: element table overflows")
		}
		flags, pos, ks, vs := le.Uint32(hdr[el:]), int(le.Uint32(hdr[el+4:])), int(le.Uint32(hdr[el+8:])), int(le.Uint32(hdr[el+12:]))
		if flags&1 == 0 {
			continue
		}
		vo := el + pos + ks
		if pos < 0 || ks < 0 || vs < 16 || vo+vs > len(hdr) || el+pos+ks > len(hdr) {
			return per, errors.New("root page: bucket header out of the page")
		}
		name := string(hdr[el+pos : el+pos+ks])
		root := le.Uint64(hdr[vo:])
		if root != 0 {
			if err := checkTree(path, m, root); err != nil {
				per[name] = err
			}
			continue
		}
		// Inline: its page must be one leaf inside the value.
		in := hdr[vo+16 : vo+vs]
		if len(in) < pageHeader || le.Uint16(in[8:]) != flagLeaf || checkElements(in) != nil {
			per[name] = errors.New("inline bucket's page is damaged")
		}
	}
	return per, nil
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
