package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// BadReplyError is a reply from Redis that limitscope refuses before its
// client library reads it: more bytes than Options.MaxReply, a length
// announced past that limit, or bytes that are not RESP. The connection is
// closed at once; the shared state treats it like an unreachable Redis.
type BadReplyError struct {
	What string // what was wrong, safe to print
}

func (e *BadReplyError) Error() string { return "a reply limitscope does not accept: " + e.What }

// replyCheck follows the RESP2/RESP3 framing of the bytes a connection
// reads and fails as soon as one reply would take more than max bytes: a
// header announcing a string longer than what is left of the budget, an
// aggregate announcing more elements than the bytes left could hold (each
// takes at least 3), or a reply (or line) actually running past it. The
// client library sees a header only once the whole header is checked, so an
// announced length it would allocate never reaches it.
type replyCheck struct {
	max     int64
	used    int64 // bytes of the current top-level reply
	state   uint8
	typ     byte
	n       int64 // the header's number so far
	neg     bool  // the header's number is negative
	digits  int
	cr      bool  // the line's CR was seen
	bulk    int64 // payload bytes (and CRLF) left of a string
	stack   []agg // open aggregates
	replies int64 // complete top-level replies (tests)
}

type agg struct {
	left int64 // elements left
	attr bool  // an attribute: it precedes a value, it is not one
}

const (
	stType = iota // the next byte is a type
	stLine        // in a header or a simple line
	stBulk        // in a string's payload
)

// lengthType reports whether a header of type t carries a length.
func lengthType(t byte) bool {
	switch t {
	case '$', '!', '=', '*', '%', '~', '>', '|':
		return true
	}
	return false
}

func simpleType(t byte) bool {
	switch t {
	case '+', '-', ':', '_', ',', '#', '(':
		return true
	}
	return false
}

func bad(format string, a ...any) error { return &BadReplyError{What: fmt.Sprintf(format, a...)} }

// feed checks b, the next bytes read; an error means the connection must
// not be read further.
func (c *replyCheck) feed(b []byte) error {
	for i := 0; i < len(b); {
		switch c.state {
		case stBulk:
			k := min(int64(len(b)-i), c.bulk)
			if c.used+k > c.max { // refused before it is taken
				return bad("a reply over %d bytes", c.max)
			}
			c.bulk -= k
			c.used += k
			i += int(k)
			if c.bulk == 0 {
				c.state = stType
				c.value()
			}
			continue
		}
		if c.used+1 > c.max { // refused before it is taken
			return bad("a reply over %d bytes", c.max)
		}
		x := b[i]
		i++
		c.used++
		switch c.state {
		case stType:
			if !lengthType(x) && !simpleType(x) {
				return bad("byte 0x%02x where a reply's type belongs", x)
			}
			c.typ, c.n, c.neg, c.digits, c.cr, c.state = x, 0, false, 0, false, stLine
		case stLine:
			if err := c.line(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// line takes one byte of a header or simple line.
func (c *replyCheck) line(x byte) error {
	if !lengthType(c.typ) {
		if x == '\n' {
			c.state = stType
			c.value()
		}
		return nil
	}
	switch {
	case c.cr:
		if x != '\n' {
			return bad("a %q header not ended by CRLF", c.typ)
		}
		return c.header()
	case x == '\r':
		if c.digits == 0 {
			return bad("a %q header without a length", c.typ)
		}
		c.cr = true
	case x == '-' && c.digits == 0 && !c.neg:
		c.neg = true
	case x >= '0' && x <= '9':
		c.digits++
		if c.digits > 18 {
			return bad("a %q header announcing a length of %d digits or more, over the limit of %d bytes", c.typ, c.digits, c.max)
		}
		c.n = c.n*10 + int64(x-'0')
	default:
		return bad("byte 0x%02x in a %q header", x, c.typ)
	}
	return nil
}

// header acts on a complete length header.
func (c *replyCheck) header() error {
	left := c.max - c.used
	if c.neg {
		if c.n != 1 {
			return bad("a %q header announcing length -%d", c.typ, c.n)
		}
		c.state = stType
		c.value() // a null
		return nil
	}
	n := c.n
	switch c.typ {
	case '$', '!', '=':
		if n+2 > left {
			return bad("a string of %d bytes announced, over the limit of %d bytes a reply", n, c.max)
		}
		c.bulk, c.state = n+2, stBulk
		return nil
	case '%', '|':
		n *= 2
	}
	if n > left/3 {
		return bad("%d elements announced, more than a reply of at most %d bytes can hold", n, c.max)
	}
	c.state = stType
	if n == 0 {
		if c.typ != '|' {
			c.value()
		}
		return nil
	}
	c.stack = append(c.stack, agg{left: n, attr: c.typ == '|'})
	return nil
}

// value records one complete value: it counts against the innermost open
// aggregate, and a value at the top ends the reply (and its budget).
func (c *replyCheck) value() {
	for len(c.stack) > 0 {
		top := &c.stack[len(c.stack)-1]
		top.left--
		if top.left > 0 {
			return
		}
		attr := top.attr
		c.stack = c.stack[:len(c.stack)-1]
		if attr {
			return // the value the attribute describes is still to come
		}
	}
	c.used = 0
	c.replies++
}

// checkedConn is a connection to Redis whose reads pass through a
// replyCheck; a failed check closes it and fails every read after.
type checkedConn struct {
	net.Conn
	mu    sync.Mutex
	check replyCheck
	err   error
	read  *atomic.Int64 // bytes read from the network, all connections (nil: not counted)
}

func (c *checkedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if c.read != nil {
		c.read.Add(int64(n))
	}
	if cerr := c.check.feed(p[:n]); cerr != nil {
		c.err = cerr
		_ = c.Conn.Close()
		return 0, cerr
	}
	return n, err
}

// sysConn is a checkedConn over a connection with a file descriptor:
// go-redis peeks at it (without reading) to find a pooled connection the
// server closed.
type sysConn struct {
	*checkedConn
	raw syscall.Conn
}

func (c sysConn) SyscallConn() (syscall.RawConn, error) { return c.raw.SyscallConn() }

// checkedDialer wraps dial so that every connection's replies are checked
// against max bytes each.
func checkedDialer(dial func(context.Context, string, string) (net.Conn, error), max int64, read *atomic.Int64) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &checkedConn{Conn: nc, check: replyCheck{max: max}, read: read}
		if raw, ok := nc.(syscall.Conn); ok {
			return sysConn{checkedConn: cc, raw: raw}, nil
		}
		return cc, nil
	}
}

// isBadReply reports whether err is a refused reply or a panic recovered
// from a command.
func isBadReply(err error) bool {
	var br *BadReplyError
	return errors.As(err, &br)
}
