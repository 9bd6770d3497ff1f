package store

import (
	"encoding/binary"
	"os"
)

// salvage reads a damaged file's leaf pages directly, without bbolt, and
// sorts the records it recognises into their buckets by shape: the key's
// length and a value that decodes completely. Repair runs it on every file,
// so records on intact pages that bbolt could not reach are kept. Pages in
// free (known free pages, when bbolt could read the free list) are skipped:
// they hold deleted records. Pages not known free may hold older copies of
// a record; an ended call or session wins over a running one, else the
// longer value. damaged counts the leaf pages whose element table did not
// hold together.
func salvage(path string, free map[int]bool) (out map[string]map[string][]byte, damaged int, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	out = map[string]map[string][]byte{}
	put := func(bucket string, k, v []byte, better func(old []byte) bool) {
		m := out[bucket]
		if m == nil {
			m = map[string][]byte{}
			out[bucket] = m
		}
		if old, ok := m[string(k)]; ok && !better(old) {
			return
		}
		m[string(k)] = append([]byte(nil), v...)
	}
	longer := func(v []byte) func([]byte) bool { return func(old []byte) bool { return len(v) > len(old) } }

	pageSize := 4096
	if len(raw) >= 32 {
		// The first meta page's page size, if it looks sane.
		if ps := int(binary.LittleEndian.Uint32(raw[16+8:])); ps >= 1024 && ps <= 1<<16 && ps&(ps-1) == 0 {
			pageSize = ps
		}
	}
	const leafFlag, bucketLeaf = 0x02, 0x01
	for off := 2 * pageSize; off+16 <= len(raw); off += pageSize {
		flags := binary.LittleEndian.Uint16(raw[off+8:])
		if flags != leafFlag || free[off/pageSize] {
			continue
		}
		count := int(binary.LittleEndian.Uint16(raw[off+10:]))
		overflow := int(binary.LittleEndian.Uint32(raw[off+12:]))
		end := off + (1+overflow)*pageSize
		if end > len(raw) || overflow > len(raw)/pageSize {
			end = len(raw)
		}
		bad := false
		for i := 0; i < count; i++ {
			el := off + 16 + i*16
			if el+16 > end {
				bad = true
				break
			}
			eflags := binary.LittleEndian.Uint32(raw[el:])
			pos := int(binary.LittleEndian.Uint32(raw[el+4:]))
			ks := int(binary.LittleEndian.Uint32(raw[el+8:]))
			vs := int(binary.LittleEndian.Uint32(raw[el+12:]))
			ko := el + pos
			if eflags&bucketLeaf != 0 {
				continue
			}
			if pos <= 0 || ks <= 0 || vs <= 0 || ko+ks+vs > end || ko+ks+vs < ko {
				bad = true
				continue
			}
			k, v := raw[ko:ko+ks], raw[ko+ks:ko+ks+vs]
			classify(k, v, put, longer)
		}
		if bad {
			damaged++
		}
	}
	return out, damaged, nil
}

// maxScopeLen bounds a cooldown's scope (its key): longer keys are damage.
const maxScopeLen = 1024

func classify(k, v []byte, put func(string, []byte, []byte, func([]byte) bool), longer func([]byte) func([]byte) bool) {
	switch {
	case len(k) == keyLen+3 && (k[keyLen] == textPrompt || k[keyLen] == textAnswer || k[keyLen] == textPartial):
		put(string(bText), k, v, longer(v))
	case len(k) == keyLen+2 && v[0] == SchemaVersion:
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
