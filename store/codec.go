package store

import (
	"encoding/binary"
	"errors"
	"time"
)

// enc appends a compact binary record: uvarints, zig-zag varints and
// length-prefixed strings. Records are versioned by their first byte.
type enc struct{ b []byte }

func (e *enc) byte(v byte)      { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) dur(d time.Duration) { e.varint(int64(d)) }
func (e *enc) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

// timeRel writes t relative to base (zero times are written as a flag).
func (e *enc) timeRel(t, base time.Time) {
	if t.IsZero() {
		e.byte(0)
		return
	}
	e.byte(1)
	e.varint(t.Sub(base).Nanoseconds())
}

func (e *enc) timeAbs(t time.Time) {
	if t.IsZero() {
		e.byte(0)
		return
	}
	e.byte(1)
	e.varint(t.UnixNano())
}

var errShort = errors.New("record truncated")

// dec reads what enc wrote. The first error sticks; later reads return zero
// values, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errShort
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int { return int(d.varint()) }

func (d *dec) rawStr() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// str copies: slices from bbolt die with the transaction.
func (d *dec) str() string { return string(d.rawStr()) }

func (d *dec) skipStr() { d.rawStr() }

func (d *dec) dur() time.Duration { return time.Duration(d.varint()) }

func (d *dec) bool() bool { return d.byte() != 0 }

func (d *dec) timeRel(base time.Time) time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	return base.Add(time.Duration(d.varint()))
}

func (d *dec) timeAbs() time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.varint()).UTC()
}

// Keys: 8 bytes of big-endian Unix nanoseconds, then a 4-byte big-endian
// sequence unique in the file, so keys sort by time and the newest N is a
// cursor walk from the end.
const keyLen = 12

func makeKey(t time.Time, seq uint32) []byte {
	k := make([]byte, keyLen, keyLen+2)
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	binary.BigEndian.PutUint32(k[8:], seq)
	return k
}

func keyTime(k []byte) time.Time {
	if len(k) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC()
}

func keySeq(k []byte) uint32 {
	if len(k) < keyLen {
		return 0
	}
	return binary.BigEndian.Uint32(k[8:])
}

func seqKey(seq uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], seq)
	return b[:]
}

// attemptKey is the call's key plus the attempt's number.
func attemptKey(call []byte, n int) []byte {
	k := make([]byte, keyLen+2)
	copy(k, call)
	binary.BigEndian.PutUint16(k[keyLen:], uint16(n))
	return k
}

// Text keys: the call's key, a kind byte, and for partial text the attempt.
const (
	textPrompt  byte = 'p'
	textAnswer  byte = 'a'
	textPartial byte = 'x'
	// textCut marks an answer the history keeps less of than the caller
	// received (retry.Result.TextTruncated); its value is one byte, 1.
	textCut byte = 'c'
)

func textKey(call []byte, kind byte, n int) []byte {
	k := make([]byte, keyLen+3)
	copy(k, call)
	k[keyLen] = kind
	binary.BigEndian.PutUint16(k[keyLen+1:], uint16(n))
	return k
}
