package store

import (
	"bytes"
	"encoding/binary"
	"os"
)

// trust is how far repair trusts one copy of a record, by where it was
// found. A file holds several copies of a key: bbolt writes every change to
// a new page and frees the old one, so freed pages keep older values, and a
// damaged page can hold anything. A copy of higher trust always wins; among
// copies of equal trust, the newer-looking value (an ended call over a
// running one, else the longer value).
type trust int

const (
	// trustDamaged: a leaf page that failed its checks (its id, or an
	// element pointing outside it).
	trustDamaged trust = iota + 1
	// trustOrphan: a page that passes its checks but that no tree of the
	// newest meta page reaches (a damaged branch hid it), or that is both
	// reached and named free, or any page when the meta pages are gone.
	trustOrphan
	// trustWalk: read by bbolt's cursor, in a tree whose links passed
	// checkTree (Repair's first pass).
	trustWalk
	// trustLive: a leaf page reached from the newest valid meta page's
	// trees, not on the free list, that passes its checks.
	trustLive
)

// candidate is one copy of a record and how far it is trusted.
type candidate struct {
	v     []byte
	trust trust
}

// salvage reads a damaged file's leaf pages directly, without bbolt, and
// sorts the records it recognises into their buckets by shape: the key's
// length and a value that decodes completely. Repair runs it on every file,
// so records on intact pages that bbolt could not reach are kept. Pages on
// the file's free list (read with plain reads, see pageMap) or in free are
// skipped unless a live tree reaches them: they hold deleted records and
// older copies. damaged counts the leaf pages whose element table did not
// hold together.
func salvage(path string, free map[int]bool) (out map[string]map[string][]byte, damaged int, err error) {
	found, damaged, err := salvageCandidates(path, free)
	if err != nil {
		return nil, 0, err
	}
	out = map[string]map[string][]byte{}
	for b, m := range found {
		out[b] = map[string][]byte{}
		for k, c := range m {
			out[b][k] = c.v
		}
	}
	return out, damaged, nil
}

// salvageCandidates is salvage that keeps, for each key, the most trusted
// copy and its trust.
func salvageCandidates(path string, extraFree map[int]bool) (out map[string]map[string]candidate, damaged int, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	out = map[string]map[string]candidate{}
	var cur trust // the page being read
	put := func(bucket string, k, v []byte, better func(old []byte) bool) {
		m := out[bucket]
		if m == nil {
			m = map[string]candidate{}
			out[bucket] = m
		}
		if old, ok := m[string(k)]; ok && (old.trust > cur || (old.trust == cur && !better(old.v))) {
			return
		}
		m[string(k)] = candidate{bytes.Clone(v), cur}
	}
	longer := func(v []byte) func([]byte) bool { return func(old []byte) bool { return len(v) > len(old) } }

	pageSize := 4096
	meta := newestMeta(raw)
	if meta.valid {
		pageSize = int(meta.pageSize)
	} else if len(raw) >= 32 {
		// The first meta page's page size, if it looks sane.
		if ps := int(binary.LittleEndian.Uint32(raw[16+8:])); ps >= 1024 && ps <= 1<<16 && ps&(ps-1) == 0 {
			pageSize = ps
		}
	}
	live, free := pageMap(raw, meta)
	var elems []elem
	for off := 2 * pageSize; off+16 <= len(raw); off += pageSize {
		id := off / pageSize
		flags := binary.LittleEndian.Uint16(raw[off+8:])
		if flags != flagLeaf || ((free[id] || extraFree[id]) && !live[id]) {
			continue
		}
		count := int(binary.LittleEndian.Uint16(raw[off+10:]))
		overflow := int(binary.LittleEndian.Uint32(raw[off+12:]))
		end := off + (1+overflow)*pageSize
		bad := binary.LittleEndian.Uint64(raw[off:]) != uint64(id)
		if end > len(raw) || overflow > len(raw)/pageSize {
			end = len(raw)
			bad = true
		}
		var elemsBad bool
		elems, elemsBad = leafElems(raw[off:end], count, elems[:0], 0)
		bad = bad || elemsBad
		switch {
		case bad:
			cur = trustDamaged
			damaged++
		case live[id] && !free[id] && !extraFree[id]:
			cur = trustLive
		default:
			cur = trustOrphan
		}
		for _, e := range elems {
			classify(e.k, e.v, put, longer)
		}
	}
	return out, damaged, nil
}

// elem is one key/value element of a leaf page.
type elem struct{ k, v []byte }

// leafElems appends to elems the key/value elements of the leaf page p
// (count of them, from its header) and those of the inline buckets it
// holds: a bucket of a few records (a file's sessions, cooldowns or
// cards, often) is kept inside its parent's leaf, as a bucket element
// whose value is a 16-byte header (root page 0) and a leaf page. bad
// reports an element that does not hold together.
func leafElems(p []byte, count int, elems []elem, depth int) (_ []elem, bad bool) {
	const bucketLeaf = 0x01
	le := binary.LittleEndian
	for i := 0; i < count; i++ {
		el := pageHeader + i*16
		if el+16 > len(p) {
			return elems, true
		}
		eflags := le.Uint32(p[el:])
		pos, ks, vs := int(le.Uint32(p[el+4:])), int(le.Uint32(p[el+8:])), int(le.Uint32(p[el+12:]))
		ko := el + pos
		if pos <= 0 || ks <= 0 || vs <= 0 || ko+ks+vs > len(p) || ko+ks+vs < ko {
			bad = bad || eflags&bucketLeaf == 0 // a bucket's is checked by its tree
			continue
		}
		v := p[ko+ks : ko+ks+vs]
		if eflags&bucketLeaf == 0 {
			elems = append(elems, elem{p[ko : ko+ks], v})
			continue
		}
		// A bucket: an inline one's page follows its header.
		if vs < 16+pageHeader || le.Uint64(v) != 0 || depth >= 4 {
			continue
		}
		in := v[16:]
		if le.Uint16(in[8:]) != flagLeaf {
			bad = true
			continue
		}
		var inBad bool
		elems, inBad = leafElems(in, int(le.Uint16(in[10:])), elems, depth+1)
		bad = bad || inBad
	}
	return elems, bad
}

// newestMeta is the valid meta page of the highest transaction at any page
// size (the zero boltMeta when neither meta page is valid).
func newestMeta(raw []byte) boltMeta {
	best := boltMeta{}
	for ps := minPageSize; ps <= maxPageSize; ps <<= 1 {
		for _, off := range []int{0, ps} {
			if off+pageHeader+64 > len(raw) {
				continue
			}
			if m := parseMeta(raw[off:]); m.valid && int(m.pageSize) == ps && (!best.valid || m.txid >= best.txid) {
				best = m
			}
		}
	}
	return best
}

// pageMap reads, with plain reads of raw and forgiving damage, which pages
// the trees of meta m reach (live) and which its free list names (free).
// A link out of the file, to a page of the wrong id or type, a cycle or a
// branch whose element table fails its checks is not followed; free-list ids
// out of the file are ignored. Both are empty when m is not valid.
func pageMap(raw []byte, m boltMeta) (live, free map[int]bool) {
	live, free = map[int]bool{}, map[int]bool{}
	if !m.valid {
		return live, free
	}
	ps := int(m.pageSize)
	hwm := min(m.hwm, uint64(len(raw)/ps))
	le := binary.LittleEndian
	// page returns page id with its overflow, or nil when its header is
	// not that of a page of that id and a type in want.
	page := func(id uint64, want ...uint16) []byte {
		if id < 2 || id >= hwm {
			return nil
		}
		off := int(id) * ps
		hdr := raw[off : off+pageHeader]
		ov := uint64(le.Uint32(hdr[12:]))
		if le.Uint64(hdr) != id || id+ov >= hwm {
			return nil
		}
		for _, t := range want {
			if le.Uint16(hdr[8:]) == t {
				return raw[off : off+(1+int(ov))*ps]
			}
		}
		return nil
	}
	if m.freelist != noFreelist {
		if p := page(m.freelist, flagFreelist); p != nil {
			count, idx := uint64(le.Uint16(p[10:])), uint64(0)
			body := p[pageHeader:]
			if count == 0xFFFF && len(body) >= 8 {
				count, idx = le.Uint64(body), 1
			}
			for i := idx; i < idx+count && (i+1)*8 <= uint64(len(body)); i++ {
				if id := le.Uint64(body[i*8:]); id >= 2 && id < hwm {
					free[int(id)] = true
				}
			}
		}
	}
	type item struct {
		id    uint64
		depth int
	}
	stack := []item{{m.root, 0}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if live[int(it.id)] || it.depth > 64 {
			continue
		}
		p := page(it.id, flagLeaf, flagBranch)
		if p == nil || checkElements(p) != nil {
			continue
		}
		live[int(it.id)] = true
		count := int(le.Uint16(p[10:]))
		for i := range count {
			el := pageHeader + i*16
			if le.Uint16(p[8:]) == flagBranch {
				stack = append(stack, item{le.Uint64(p[el+8:]), it.depth + 1})
				continue
			}
			// A leaf's bucket element: its value starts with the
			// bucket's root page (0 for an inline bucket).
			pos, ks, vs := int(le.Uint32(p[el+4:])), int(le.Uint32(p[el+8:])), int(le.Uint32(p[el+12:]))
			if le.Uint32(p[el:])&1 != 0 && vs >= 16 {
				if root := le.Uint64(p[el+pos+ks:]); root != 0 {
					stack = append(stack, item{root, 0})
				}
			}
		}
	}
	return live, free
}

// unreadableCards is salvage's pseudo-bucket of the card keys found with a
// value that is no card.
const unreadableCards = "cards\x00unreadable"

// maxScopeLen bounds a cooldown's scope (its key): longer keys are damage.
const maxScopeLen = 1024

func classify(k, v []byte, put func(string, []byte, []byte, func([]byte) bool), longer func([]byte) func([]byte) bool) {
	switch {
	case len(v) > 0 && v[0] == '{' && validCard(k, v):
		// A limits card: its value is JSON, where every call record's
		// starts with its version byte (a prompt's text can be JSON, but
		// a text key, starting with the top bytes of a time, is never a
		// card's target).
		put(string(bCards), k, v, longer(v))
	case validCardKey(k):
		// A card's key (no other record's key is a target, a zero byte
		// and a time) with a value that is no card: a damaged card,
		// which repair counts as skipped unless a readable copy is found.
		put(unreadableCards, k, []byte{0}, func([]byte) bool { return false })
	case len(k) == keyLen+3 && validTextKey(k):
		put(string(bText), k, v, longer(v))
	case len(k) == keyLen+3:
		// A text key of an unknown kind or number: damage.
	case len(k) == keyLen+2 && v[0] == SchemaVersion && keyAttempt(k) > 0:
		if _, rest, err := decodeAttemptRest(k, v, keyTime(k), nil); err == nil && rest == 0 {
			put(string(bAttempts), k, v, longer(v))
		}
	case len(k) == keyLen && v[0] == SchemaVersion:
		if c, rest, err := decodeCallRest(k, v, false); err == nil && rest == 0 {
			put(string(bCalls), k, v, func(old []byte) bool {
				oc, err := decodeCall(k, old, true)
				return err != nil || (oc.Outcome == OutcomeRunning && c.Outcome != OutcomeRunning) ||
					(oc.Outcome == c.Outcome && len(v) > len(old))
			})
		} else if s, rest, err := decodeSessionRest(k, v); err == nil && rest == 0 {
			put(string(bSessions), k, v, func(old []byte) bool {
				os, err := decodeSession(k, old)
				return err != nil || (os.Ended.IsZero() && !s.Ended.IsZero())
			})
		}
	case len(v) > 1 && v[0] == SchemaVersion && v[1] == '{' && len(k) <= maxScopeLen:
		if c, err := decodeCooldown(v); err == nil && c.Scope == string(k) {
			put(string(bCooldowns), k, v, longer(v))
		}
	}
}

// validTextKey reports whether k is a text key as textKey makes them: a
// prompt or an answer of number 0, or an attempt's partial text (from 1).
func validTextKey(k []byte) bool {
	if len(k) != keyLen+3 {
		return false
	}
	n := binary.BigEndian.Uint16(k[keyLen+1:])
	switch k[keyLen] {
	case textPrompt, textAnswer:
		return n == 0
	case textPartial:
		return n > 0
	}
	return false
}

// keyAttempt is an attempt key's attempt number (0 for another key).
func keyAttempt(k []byte) int {
	if len(k) != keyLen+2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(k[keyLen:]))
}
