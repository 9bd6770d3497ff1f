package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// words is the vocabulary of the simulated answers. It is never written.
var words = strings.Fields(`the a rate limit window bucket token request retry after second minute
provider model stream answer server client budget quota wait backoff jitter failover fallback
header reset remaining latency burst steady simulated response event signal error class policy
calm busy overload spend daily cap pace deadline attempt target chain route cost usage prompt
clear quick gentle careful honest simple small large bright quiet patient ready slow fast
is was can will may should would often never always usually here there then now again soon
and or but so because while when if until before`)

// tokensOf estimates tokens the simulator's way: about four characters a
// token, at least one for a non-empty text.
func tokensOf(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 3) / 4
}

// seedOf hashes the parts into a seed for the answer's random source.
func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// answer makes the deterministic text for one request: the same seed,
// model and prompt give the same text. maxTokens > 0 caps its length (the
// finish reason is then "length"). It returns the text split in word-sized
// pieces, and whether it was cut by maxTokens.
func answer(seed int64, model, prompt string, maxTokens int) (pieces []string, truncated bool) {
	r := rand.New(rand.NewPCG(uint64(seed), seedOf(model, prompt)))
	want := 24 + r.IntN(72) // tokens
	if maxTokens > 0 && want > maxTokens {
		want, truncated = maxTokens, true
	}
	budget := want * 4 // characters
	if !truncated {
		budget-- // room for the final full stop
	}
	var b strings.Builder
	sentence := 0
	for b.Len() < budget {
		w := words[r.IntN(len(words))]
		if sentence == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		piece := w
		if b.Len() > 0 {
			piece = " " + w
		}
		sentence++
		if sentence > 5 && r.IntN(6) == 0 {
			piece += "."
			sentence = 0
		}
		if b.Len()+len(piece) > budget {
			if !truncated && b.Len() > 0 {
				break // a natural end: stop at a whole word
			}
			piece = piece[:budget-b.Len()] // max_tokens cuts mid-word, as real models do
			if strings.TrimSpace(piece) == "" {
				break
			}
		}
		b.WriteString(piece)
		pieces = append(pieces, piece)
	}
	if !truncated && len(pieces) > 0 {
		last := strings.TrimSuffix(pieces[len(pieces)-1], ".")
		pieces[len(pieces)-1] = last + "."
	}
	return pieces, truncated
}

// groupPieces joins pieces n at a time (Gemini sends larger chunks).
func groupPieces(pieces []string, n int) []string {
	if n <= 1 {
		return pieces
	}
	var out []string
	for i := 0; i < len(pieces); i += n {
		j := min(i+n, len(pieces))
		out = append(out, strings.Join(pieces[i:j], ""))
	}
	return out
}

// answerShape is Options.Answer parsed: a shape and a size in bytes (0:
// the shape's default).
type answerShape struct {
	kind  string // "" (a short reply), "words", "paragraph", "paragraphs", "code"
	size  int
	think int // bytes of reasoning streamed before the answer (thinking.go); 0: none
}

const maxAnswerSize = 64 << 20

// parseAnswer reads "SHAPE[:SIZE]": SHAPE is words, paragraph, paragraphs
// or code; SIZE is bytes ("800", "64KB", "1MB") or tokens ("500t").
func parseAnswer(spec string) (answerShape, error) {
	think, rest, err := cutThink(spec)
	if err != nil {
		return answerShape{}, err
	}
	if think > 0 {
		a, err := parseAnswer(rest)
		if err != nil || a.think > 0 {
			return answerShape{}, fmt.Errorf("answer %q: want think[:SIZE][+SHAPE[:SIZE]] (e.g. think:200t+paragraph:4KB)", spec)
		}
		a.think = think
		return a, nil
	}
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "short" {
		return answerShape{}, nil
	}
	kind, size, hasSize := strings.Cut(spec, ":")
	switch kind {
	case "words", "paragraph", "paragraphs", "code":
	default:
		return answerShape{}, fmt.Errorf("answer %q: want words, paragraph, paragraphs or code, optionally with :SIZE (e.g. paragraph:1MB)", spec)
	}
	a := answerShape{kind: kind}
	if !hasSize {
		return a, nil
	}
	n, err := parseSize(size)
	if err != nil {
		return answerShape{}, fmt.Errorf("answer %q: %w", spec, err)
	}
	a.size = n
	return a, nil
}

// parseSize reads "800", "800B", "64KB", "1MB" (bytes) or "500t" (tokens,
// four bytes each).
func parseSize(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"TOKENS", 4}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"T", 4}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(u))
	if err != nil || n <= 0 || n > maxAnswerSize/mult {
		return 0, fmt.Errorf("size %q: want a positive size up to 64MB, like 800, 64KB, 1MB or 500t", s)
	}
	return n * mult, nil
}

// answerText makes the answer to req in the simulator's shape: the same
// seed, model and prompt give the same text. max_tokens caps it (the
// finish reason is then "length").
func (s *Server) answerText(req *simRequest) ([]string, bool) {
	seed := s.Seed()
	if s.answer.kind == "words" && s.answer.size == 0 {
		return answer(seed, req.model, req.prompt, req.maxTokens)
	}
	r := rand.New(rand.NewPCG(uint64(seed), seedOf(req.model, req.prompt, s.answer.kind)))
	var text string
	switch s.answer.kind {
	case "":
		text = shortReply(r, req)
	case "words":
		text = wordsOf(r, s.answer.size)
	case "paragraph":
		text = paragraph(r, req, max(s.answer.size, 1), true)
	case "paragraphs":
		size := s.answer.size
		if size == 0 {
			size = 4 << 10
		}
		var b strings.Builder
		for b.Len() < size {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			// The separator can reach the size; what is left may then be
			// nothing, and a paragraph is never asked for less than a byte.
			left := size - b.Len()
			if left <= 0 {
				break
			}
			b.WriteString(paragraph(r, req, min(left, 300+r.IntN(500)), b.Len() == 0))
		}
		text = strings.TrimRight(b.String(), "\n")
	case "code":
		text = codeBlock(r, s.answer.size)
	}
	if s.answer.kind == "paragraph" && s.answer.size == 0 {
		text = paragraph(r, req, 2<<10, true)
	}
	return splitPieces(text, req.maxTokens)
}

// shortReply is the default answer: a few sentences that say who answered
// and what happened.
func shortReply(r *rand.Rand, req *simRequest) string {
	head := strings.Join(strings.Fields(req.prompt), " ")
	if len(head) > 60 {
		head = strings.TrimSpace(head[:60]) + "…"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "This is %s, simulated by limitscope on its %s endpoint. ", req.model, req.provider)
	if head != "" {
		fmt.Fprintf(&b, "You asked: %q. ", head)
	}
	b.WriteString("This request fit within its simulated limits and was answered.")
	// A few different notes, none twice.
	perm := r.Perm(len(notes))
	n := 2 + r.IntN(3)
	headers := sendsLimitHeaders(req.provider)
	for _, i := range perm {
		if n == 0 {
			break
		}
		if !headers && slices.Contains(headerNotes, notes[i]) {
			continue
		}
		b.WriteString(" " + notes[i])
		n--
	}
	return b.String()
}

// sendsLimitHeaders: the provider's answers carry rate-limit headers.
func sendsLimitHeaders(provider string) bool {
	p := providerOf(provider)
	return p != nil && p.limitHeaders
}

// headerNotes are the notes that speak of headers only some providers send
// (the rate-limit headers and Retry-After): said only by those.
var headerNotes = []string{
	"A 429 would have named how long to wait in its Retry-After header.",
	"The rate-limit headers on this response show what is left in each window.",
}

// notesFor is the notes true of the provider's answers: without the header
// notes where it sends no rate-limit headers (Gemini, Bedrock, ...).
func notesFor(provider string) []string {
	if sendsLimitHeaders(provider) {
		return notes
	}
	out := make([]string, 0, len(notes))
	for _, n := range notes {
		if !slices.Contains(headerNotes, n) {
			out = append(out, n)
		}
	}
	return out
}

// notes are the sentences answers are written from. They are never written.
var notes = []string{
	"Each provider keeps its own limits here, on the simulator's clock.",
	"A 429 would have named how long to wait in its Retry-After header.",
	"The rate-limit headers on this response show what is left in each window.",
	"An overloaded provider answers 529 or 503, and a fallback on another provider can serve instead.",
	"A spend cap or a daily quota stops every request until its reset, or until a person acts.",
	"Streams can break after HTTP 200, so a client has to watch for the end event.",
	"Retries that ignore Retry-After are refused until the wait has passed.",
	"Failover moves the call to the next target in the chain when the first cannot answer soon.",
	"The simulator's seed makes a run reproducible: the same seed gives the same ids and faults.",
	"Token counts are estimated at about four characters a token.",
}

// paragraph writes sentences up to about size bytes as one paragraph.
func paragraph(r *rand.Rand, req *simRequest, size int, first bool) string {
	var b strings.Builder
	if first {
		fmt.Fprintf(&b, "This long answer comes from %s, simulated by limitscope on its %s endpoint.", req.model, req.provider)
	}
	pool := notesFor(req.provider)
	for b.Len() < size {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(pool[r.IntN(len(pool))])
	}
	return trimTo(b.String(), size)
}

// wordsOf is size bytes of words (default 200 words).
func wordsOf(r *rand.Rand, size int) string {
	var b strings.Builder
	for n := 0; size > 0 && b.Len() < size || size == 0 && n < 200; n++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	if size == 0 {
		return b.String()
	}
	return trimTo(b.String(), size)
}

// codeBlock is a fenced Go code block of about size bytes (default 1 KB).
func codeBlock(r *rand.Rand, size int) string {
	if size == 0 {
		size = 1 << 10
	}
	var b strings.Builder
	b.WriteString("```go\n// wait honours the server's Retry-After before the next attempt.\nfunc wait(ctx context.Context, d time.Duration) error {\n")
	for i := 0; b.Len() < size-40; i++ {
		w := words[r.IntN(len(words))]
		fmt.Fprintf(&b, "\t%s%d := retryAfter(%q, %d*time.Millisecond)\n", w, i, w, 100+r.IntN(900))
	}
	b.WriteString("\treturn sleep(ctx, d)\n}\n```")
	return b.String()
}

// trimTo cuts s to at most n bytes (nothing for n <= 0) without splitting
// a UTF-8 sequence.
func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// splitPieces cuts text into word-sized pieces (each word with the space
// before it), capped at maxTokens (0: no cap); truncated says it was cut.
func splitPieces(text string, maxTokens int) ([]string, bool) {
	truncated := false
	if maxTokens > 0 && tokensOf(text) > maxTokens {
		text, truncated = trimTo(text, maxTokens*4), true
	}
	var pieces []string
	start := 0
	for i := 1; i <= len(text); i++ {
		if i == len(text) || (text[i] == ' ' || text[i] == '\n') && text[i-1] != ' ' && text[i-1] != '\n' {
			pieces = append(pieces, text[start:i])
			start = i
		}
	}
	return pieces, truncated
}
