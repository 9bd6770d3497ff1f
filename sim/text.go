package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
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
