package fleet

import (
	"strings"
	"testing"
)

// replyCheck accepts well-formed replies within the limit, byte by byte as
// in one piece, and counts them.
func TestReplyCheckAccepts(t *testing.T) {
	replies := "+OK\r\n-ERR x\r\n:12\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n*0\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n" +
		"%1\r\n+k\r\n+v\r\n_\r\n,1.5\r\n#t\r\n(123\r\n=7\r\ntxt:abc\r\n~1\r\n+x\r\n>2\r\n+a\r\n+b\r\n|1\r\n+a\r\n+b\r\n:3\r\n!3\r\nerr\r\n"
	const want = 18
	whole := replyCheck{max: 1 << 10}
	if err := whole.feed([]byte(replies)); err != nil || whole.replies != want || whole.used != 0 {
		t.Fatalf("in one piece: %v, %d replies, %d bytes pending; want nil, %d, 0", err, whole.replies, whole.used, want)
	}
	bytewise := replyCheck{max: 1 << 10}
	for i := range len(replies) {
		if err := bytewise.feed([]byte{replies[i]}); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
	}
	if bytewise.replies != want {
		t.Fatalf("byte by byte: %d replies, want %d", bytewise.replies, want)
	}
}

// Each limit bites, per reply: a budget spent by one reply is back for the
// next.
func TestReplyCheckRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"announced string":  "$100\r\n",
		"announced array":   "*40\r\n",
		"announced map":     "%20\r\n",
		"sent line":         "+" + strings.Repeat("x", 100),
		"sent array":        "*30\r\n" + strings.Repeat(":1\r\n", 30),
		"huge length":       "$9000000000000000000\r\n",
		"negative length":   "$-2\r\n",
		"no length":         "$\r\n",
		"garbage":           "GET x\r\n",
		"bad header byte":   "*1x\r\n",
		"header without LF": "$1\rx",
	} {
		c := replyCheck{max: 100}
		if err := c.feed([]byte(in)); err == nil {
			t.Errorf("%s: accepted %q", name, in)
		}
	}
	c := replyCheck{max: 100}
	for i := range 10 {
		if err := c.feed([]byte("$80\r\n" + strings.Repeat("y", 80) + "\r\n")); err != nil {
			t.Fatalf("reply %d of 80 bytes within a 100-byte limit: %v", i, err)
		}
	}
}

// FuzzReplyCheck: any bytes, in any split, give the same verdict and never
// let a reply's bytes past the limit.
func FuzzReplyCheck(f *testing.F) {
	f.Add([]byte("*2\r\n$1\r\na\r\n:1\r\n"), uint8(3))
	f.Add([]byte("$9000000000000000000\r\n"), uint8(1))
	f.Add([]byte("|1\r\n+a\r\n+b\r\n%1\r\n+k\r\n*1\r\n_\r\n"), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		const max = 256
		whole := replyCheck{max: max}
		werr := whole.feed(in)
		split := replyCheck{max: max}
		n := int(step%16) + 1
		var serr error
		for i := 0; i < len(in) && serr == nil; i += n {
			serr = split.feed(in[i:min(len(in), i+n)])
		}
		if (werr == nil) != (serr == nil) || whole.replies != split.replies && werr == nil {
			t.Fatalf("in one piece: %v (%d replies); in pieces of %d: %v (%d replies)", werr, whole.replies, n, serr, split.replies)
		}
		if whole.used > max {
			t.Fatalf("%d bytes of one reply taken, over %d", whole.used, max)
		}
	})
}
