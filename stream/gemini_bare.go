package stream

import "io"

// geminiBareReader passes an SSE stream through unchanged, except that a
// JSON object written on its own lines (not after "data:") becomes a data
// event. Gemini's SDKs accept an error sent that way: python-genai buffers
// non-"data: " lines by brace balance, go-genai reads any non-data block as
// {"error": ...}. Each line of such a block is prefixed "data: " and the
// block is closed with a blank line once its braces balance, so go-sse then
// sees an ordinary event. It works byte by byte and buffers nothing, so the
// event size limit stays go-sse's.
type geminiBareReader struct {
	r   io.Reader
	in  []byte
	out []byte
	err error

	lineStart bool // the next byte starts a line
	afterCR   bool // the previous byte was a '\r' (a following '\n' belongs to it)

	inBlock bool // inside a bare JSON block
	depth   int
	inStr   bool
	esc     bool
	closing bool // the block's braces balanced; finish its line, then dispatch

	swallowLF bool // a CRLF's '\r' was already replaced by the dispatching blank line
}

func newGeminiBareReader(r io.Reader) *geminiBareReader {
	return &geminiBareReader{r: r, in: make([]byte, 4096), lineStart: true}
}

func (g *geminiBareReader) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		n, err := g.r.Read(g.in)
		g.out = g.out[:0]
		for _, c := range g.in[:n] {
			g.feed(c)
		}
		if err != nil {
			if g.inBlock && g.closing {
				g.out = append(g.out, '\n', '\n')
				g.inBlock = false
			}
			g.err = err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

func (g *geminiBareReader) feed(c byte) {
	crlf := g.afterCR && c == '\n'
	g.afterCR = c == '\r'
	if crlf { // the second byte of a CRLF line end
		if !g.swallowLF {
			g.out = append(g.out, c)
		}
		g.swallowLF = false
		return
	}
	g.swallowLF = false
	eol := c == '\n' || c == '\r'

	if !g.inBlock {
		if g.lineStart && c == '{' {
			g.inBlock, g.depth, g.inStr, g.esc, g.closing = true, 0, false, false, false
			// A blank line first dispatches whatever event was pending.
			g.out = append(g.out, '\n')
		} else {
			g.out = append(g.out, c)
			g.lineStart = eol
			return
		}
	}

	if g.closing {
		if eol {
			g.out = append(g.out, '\n', '\n')
			g.inBlock = false
			g.lineStart = true
			g.swallowLF = c == '\r'
			return
		}
		g.out = append(g.out, c)
		return
	}
	if g.lineStart {
		g.out = append(g.out, "data: "...)
	}
	g.out = append(g.out, c)
	g.lineStart = eol
	switch {
	case g.inStr && g.esc:
		g.esc = false
	case g.inStr && c == '\\':
		g.esc = true
	case g.inStr && c == '"':
		g.inStr = false
	case g.inStr:
	case c == '"':
		g.inStr = true
	case c == '{':
		g.depth++
	case c == '}':
		g.depth--
		if g.depth <= 0 {
			g.closing = true
		}
	}
}
