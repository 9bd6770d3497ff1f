package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Reader runs queries on a history file. Each query opens the file
// read-only for one transaction and closes it; first, when journals wait
// beside the file and its lock is free, it merges them (see JournalDir).
type Reader struct {
	Path        string
	LockTimeout time.Duration // default 2s

	chunk int // calls per read transaction of Stats (default statsChunk)
}

// view merges the file's journals if its lock is free this instant (a
// writer that holds it merges them itself), then runs fn in one read
// transaction.
func (r *Reader) view(fn func(tx *bolt.Tx) error) error {
	_ = MergeJournals(r.Path, time.Nanosecond)
	return view(r.Path, r.LockTimeout, fn)
}

// Filter selects calls. Zero fields match everything.
type Filter struct {
	// Provider keeps the calls that tried it: an attempt went to it
	// (List, Stats and Each read each call's attempts for that); with
	// InChain, the calls with it anywhere in their chain, used or not.
	Provider string
	InChain  bool
	Outcome  retry.Outcome
	Class    stream.Class // any attempt of the call had it
	Since    time.Time    // started at or after
	BeforeID uint32       // paging: only calls older than this id's call
	Limit    int          // at most this many (0: no limit)
	// Text keeps calls whose prompt head, targets or outcome contain it
	// (case-insensitive; the targets tried, not unused fallbacks); List only.
	Text string
	// PromptHead fills each listed Call's Prompt with the prompt's first
	// PromptHead bytes (cut at a rune), for a list that shows it; List only.
	PromptHead int
	// Route keeps proxied calls whose route (the model name the request
	// asked for) is exactly this; Client those whose client contains this
	// (case-insensitive). They are not in the summary: a call is then read
	// in full, which List and Stats otherwise avoid.
	Route  string
	Client string
	// Origin fills each listed Call's Route and Client (List only; Show and
	// Each always do). It reads each listed call in full.
	Origin bool
	// Attempts fills each listed Call's AttemptsList, in order, without
	// their partial texts (List only; Show and Each always do): a list
	// that shows what happened in time order reads it.
	Attempts bool
	// Mode keeps the calls of sessions of this mode: ModeReal or
	// ModeSimulated (List, Stats and Each). Calls recorded before calls
	// carried their mode are matched through their session.
	Mode string
}

// modes finds a call's mode: its own, else its session's (read once per
// query, only when a call without one is met).
type modes struct {
	bySession map[uint32]string
}

func (m *modes) of(tx *bolt.Tx, own string, session uint32) string {
	if own != "" {
		return own
	}
	if m.bySession == nil {
		m.bySession = map[uint32]string{}
		if b := tx.Bucket(bSessions); b != nil {
			_ = b.ForEach(func(k, v []byte) error {
				if s, err := decodeSession(k, v); err == nil && s.Mode != "" {
					m.bySession[s.ID] = s.Mode
				}
				return nil
			})
		}
	}
	if mode, ok := m.bySession[session]; ok {
		return mode
	}
	return ModeReal // a session without a mode predates the simulator
}

// byOrigin reports whether f needs each call's route and client.
func (f *Filter) byOrigin() bool { return f.Route != "" || f.Client != "" }

// originMatch reports whether a call with this route and client matches
// f.Route and f.Client.
func (f *Filter) originMatch(route, client string) bool {
	if f.Route != "" && route != f.Route {
		return false
	}
	if f.Client != "" && !strings.Contains(strings.ToLower(client), strings.ToLower(f.Client)) {
		return false
	}
	return true
}

// readOrigin decodes the route and client of the call record v.
func readOrigin(k, v []byte) (route, client string, err error) {
	if len(v) == 0 || v[0] != SchemaVersion {
		return "", "", nil // schema 1 had none
	}
	c, err := decodeCall(k, v, false)
	if err != nil {
		return "", "", err
	}
	return c.Route, c.Client, nil
}

// textMatch reports whether the call matches f.Text.
func (f *Filter) textMatch(c *Call, prompt string) bool {
	if f.Text == "" {
		return true
	}
	needle := strings.ToLower(f.Text)
	hay := []string{prompt, string(c.Outcome)}
	// The call's primary and the targets tried, not an unused fallback;
	// the chain for a record whose attempts are not at hand.
	if len(c.AttemptsList) > 0 || c.Attempts == 0 {
		if len(c.Chain) > 0 {
			hay = append(hay, c.Chain[0].String())
		}
		for _, a := range c.AttemptsList {
			hay = append(hay, a.Target.String())
		}
	} else {
		for _, t := range c.Chain {
			hay = append(hay, t.String())
		}
	}
	if c.ServedBy != nil {
		hay = append(hay, c.ServedBy.String())
	}
	for _, h := range hay {
		if strings.Contains(strings.ToLower(h), needle) {
			return true
		}
	}
	return false
}

// head cuts s to at most n bytes, at a rune boundary.
func head(s []byte, n int) string {
	if len(s) <= n {
		return string(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return string(s[:n])
}

func (f *Filter) match(c *Call) bool {
	if f.Outcome != "" && c.Outcome != f.Outcome {
		return false
	}
	if f.Class != "" && classMask(c.Classes)&classBit(f.Class) == 0 {
		return false
	}
	if f.Provider != "" && !f.providerMatch(c) {
		return false
	}
	return true
}

// byTried reports whether f matches a provider by the attempts: the calls
// it selects need their attempts read first.
func (f *Filter) byTried() bool { return f.Provider != "" && !f.InChain }

// providerMatch reports whether c tried f.Provider (or, with f.InChain,
// has it in its chain). A call whose attempts are not at hand (a record
// from before they were kept apart) is matched by its chain.
func (f *Filter) providerMatch(c *Call) bool {
	if f.byTried() && (len(c.AttemptsList) > 0 || c.Attempts == 0) {
		for _, a := range c.AttemptsList {
			if a.Target.Provider == f.Provider {
				return true
			}
		}
		return false
	}
	for _, t := range c.Chain {
		if t.Provider == f.Provider {
			return true
		}
	}
	return false
}

// ErrNotFound is returned by Show for an unknown id.
var ErrNotFound = errors.New("no such call")

// List returns calls newest first, decoding only their summaries.
func (r *Reader) List(ctx context.Context, f Filter) ([]Call, error) {
	var out []Call
	err := r.view(func(tx *bolt.Tx) error {
		if tx == nil {
			return nil
		}
		calls := tx.Bucket(bCalls)
		if calls == nil {
			return nil
		}
		c := calls.Cursor()
		text := tx.Bucket(bText)
		var md modes
		var ac *bolt.Cursor // the attempts, with f.Attempts
		var k, v []byte
		if f.BeforeID != 0 {
			key, err := lookupKey(tx, f.BeforeID)
			if err != nil {
				return err
			}
			if k, _ = c.Seek(key); k != nil {
				k, v = c.Prev()
			} else {
				k, v = c.Last()
			}
		} else {
			k, v = c.Last()
		}
		var since []byte
		if !f.Since.IsZero() {
			since = makeKey(f.Since, 0)
		}
		for n := 0; k != nil; k, v = c.Prev() {
			if since != nil && bytes.Compare(k, since) < 0 {
				break
			}
			if n&1023 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			n++
			call, err := decodeCall(k, v, true)
			if err != nil {
				return err
			}
			if f.Attempts || f.byTried() || f.Text != "" {
				if ac == nil {
					ac = attemptsCursor(tx)
				}
				if call.AttemptsList, err = readAttemptsAt(ac, k, call.Started, call.Chain, call.Attempts, nil); err != nil {
					return err
				}
			}
			if !f.match(call) {
				continue
			}
			if f.Mode != "" && md.of(tx, call.Mode, call.Session) != f.Mode {
				continue
			}
			if f.byOrigin() || f.Origin {
				if call.Route, call.Client, err = readOrigin(k, v); err != nil {
					return err
				}
				if !f.originMatch(call.Route, call.Client) {
					continue
				}
			}
			if f.Text != "" || f.PromptHead > 0 {
				var prompt string
				if text != nil {
					prompt = head(text.Get(textKey(k, textPrompt, 0)), max(f.PromptHead, 512))
				} else if len(v) > 0 && v[0] == 1 {
					if _, j, err := decodeCallV1Full(k, v); err == nil {
						prompt = head([]byte(j.Prompt), max(f.PromptHead, 512))
					}
				}
				if !f.textMatch(call, prompt) {
					continue
				}
				if f.PromptHead > 0 {
					call.Prompt = head([]byte(prompt), f.PromptHead)
				}
			}
			if !f.Attempts {
				call.AttemptsList = nil // read only to match the provider
			}
			out = append(out, *call)
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list history: %w", err)
	}
	return out, nil
}

// lookupKey finds a call's key from its id.
func lookupKey(tx *bolt.Tx, id uint32) ([]byte, error) {
	if ids := tx.Bucket(bIDs); ids != nil {
		if k := ids.Get(seqKey(id)); k != nil {
			return slices.Clone(k), nil
		}
	}
	// Schema 1 files have no index.
	if calls := tx.Bucket(bCalls); calls != nil && tx.Bucket(bIDs) == nil {
		c := calls.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if keySeq(k) == id {
				return slices.Clone(k), nil
			}
		}
	}
	return nil, fmt.Errorf("call %d: %w", id, ErrNotFound)
}

// Show returns one call in full, with its attempts and text. id is the
// short id from List, or the engine's call id.
func (r *Reader) Show(ctx context.Context, id string) (*Call, error) {
	var out *Call
	err := r.view(func(tx *bolt.Tx) error {
		if tx == nil {
			return fmt.Errorf("call %s: %w", id, ErrNotFound)
		}
		calls := tx.Bucket(bCalls)
		var key []byte
		if n, err := strconv.ParseUint(id, 10, 32); err == nil {
			key, err = lookupKey(tx, uint32(n))
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		if key == nil && calls != nil {
			c := calls.Cursor()
			for k, v := c.Last(); k != nil; k, v = c.Prev() {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				call, err := decodeCall(k, v, false)
				if err == nil && call.CallID == id {
					key = slices.Clone(k)
					break
				}
			}
		}
		if key == nil || calls == nil {
			return fmt.Errorf("call %s: %w", id, ErrNotFound)
		}
		v := calls.Get(key)
		if v == nil {
			return fmt.Errorf("call %s: %w", id, ErrNotFound)
		}
		call, err := decodeCall(key, v, false)
		if err != nil {
			return err
		}
		if len(v) > 0 && v[0] == 1 {
			if _, j, err := decodeCallV1Full(key, v); err == nil {
				call.Prompt, call.Text = j.Prompt, j.Text
			}
		}
		call.AttemptsList, err = readAttempts(tx, key, call.Started, call.Chain, call.Attempts)
		if err != nil {
			return err
		}
		if text := tx.Bucket(bText); text != nil {
			tc := text.Cursor()
			for k, tv := tc.Seek(key); k != nil && bytes.HasPrefix(k, key); k, tv = tc.Next() {
				if len(k) != keyLen+3 {
					continue
				}
				n := int(k[keyLen+1])<<8 | int(k[keyLen+2])
				switch k[keyLen] {
				case textPrompt:
					call.Prompt = string(tv)
				case textAnswer:
					call.Text = string(tv)
				case textCut:
					call.TextCut = true
				case textPartial:
					for i := range call.AttemptsList {
						if call.AttemptsList[i].N == n {
							call.AttemptsList[i].PartialText = string(tv)
						}
					}
				}
			}
		}
		out = call
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("show %s: %w", id, err)
	}
	return out, nil
}

func readAttempts(tx *bolt.Tx, key []byte, start time.Time, chain []stream.Target, hint int) ([]retry.Attempt, error) {
	return readAttemptsAt(attemptsCursor(tx), key, start, chain, hint, nil)
}

// attemptsCursor is a cursor on tx's attempts, nil when it has none.
func attemptsCursor(tx *bolt.Tx) *bolt.Cursor {
	if b := tx.Bucket(bAttempts); b != nil {
		return b.Cursor()
	}
	return nil
}

// readAttemptsAt reads a call's attempts with c (nil: none), a cursor on
// the attempts that a loop over calls reuses (each new cursor's first seek
// allocates its path through the tree), appending them to into (nil: a
// slice sized by hint, the attempts the call's record counts).
func readAttemptsAt(c *bolt.Cursor, key []byte, start time.Time, chain []stream.Target, hint int, into []retry.Attempt) ([]retry.Attempt, error) {
	if c == nil {
		return nil, nil
	}
	out := into
	k, v := c.Seek(key)
	if out == nil && k != nil && bytes.HasPrefix(k, key) {
		// Room for the attempts the call's record counts (a damaged count
		// only sizes the first allocation), not a slice grown one at a time.
		out = make([]retry.Attempt, 0, min(max(hint, 1), 64))
	}
	for ; k != nil && bytes.HasPrefix(k, key); k, v = c.Next() {
		a, err := decodeAttempt(k, v, start, chain)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, nil // as a call without attempts always read
	}
	return out, nil
}

// ProviderStats are the numbers a team watches, for the calls whose primary
// target is one provider (Provider "" is the total).
type ProviderStats struct {
	Provider string `json:"provider"`
	// Calls are the calls whose chain began with this provider (its
	// primary); the figures below are theirs. Tried are the calls that sent
	// it at least one request (a skipped or unused fallback is not tried);
	// Served are the calls it answered, as primary or as a fallback.
	Calls          int           `json:"calls"`
	Tried          int           `json:"tried"`
	Served         int           `json:"served"`
	Running        int           `json:"running"`
	Retried        int           `json:"retried"`       // calls that needed more than one request
	RetriedShare   float64       `json:"retried_share"` // Retried / Calls
	Retries        int           `json:"retries"`       // requests after the first, summed
	RetriesPerCall float64       `json:"retries_per_call"`
	P50            time.Duration `json:"-"`
	P95            time.Duration `json:"-"`
	P50Ms          float64       `json:"p50_ms"` // latency including waits, of ended calls
	P95Ms          float64       `json:"p95_ms"`
	OK             int           `json:"ok"`
	GaveUp         int           `json:"gave_up"`
	GiveUpRate     float64       `json:"give_up_rate"`
	QuotaStops     int           `json:"quota_stops"` // calls stopped by a quota or a cooldown
	Failed         int           `json:"failed"`
	Deferred       int           `json:"deferred"`
	Cancelled      int           `json:"cancelled"`
	Interrupted    int           `json:"interrupted"` // its process died mid-call
}

type statAcc struct {
	ProviderStats
	lat latencies
}

// latencies keeps what a percentile needs in bounded memory: the values
// themselves up to maxExact (percentiles exact), then a histogram of
// log-linear buckets (within 1/128 of the true value) of fixed size.
type latencies struct {
	exact []time.Duration
	hist  []uint64 // nil until exact is full
	n     int
}

const (
	maxExact    = 1 << 15
	histBuckets = 128 + 56*64 // a Duration has at most 63 bits
)

func (l *latencies) add(d time.Duration) {
	l.n++
	if l.hist == nil {
		if len(l.exact) < maxExact {
			l.exact = append(l.exact, d)
			return
		}
		l.hist = make([]uint64, histBuckets)
		for _, x := range l.exact {
			l.hist[histIndex(x)]++
		}
		l.exact = nil
	}
	l.hist[histIndex(d)]++
}

// histIndex: values below 128ns exactly, then 64 buckets per octave.
func histIndex(d time.Duration) int {
	if d < 128 {
		return int(max(d, 0))
	}
	v := uint64(d)
	e := bits.Len64(v) - 7 // v>>e is in [64, 128)
	return 128 + (e-1)*64 + int(v>>e) - 64
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < 128 {
		return time.Duration(i)
	}
	e := (i-128)/64 + 1
	m := uint64((i-128)%64 + 64)
	return time.Duration(m<<e + (uint64(1)<<e)/2)
}

// percentile is the nearest-rank percentile p of the values added.
func (l *latencies) percentile(p float64) time.Duration {
	if l.hist == nil {
		slices.Sort(l.exact)
		return percentile(l.exact, p)
	}
	rank := int(p*float64(l.n)+0.999999999) - 1
	rank = max(0, min(rank, l.n-1))
	seen := 0
	for i, c := range l.hist {
		if seen += int(c); seen > rank {
			return histValue(i)
		}
	}
	return 0
}

func (a *statAcc) add(s *callStat) {
	a.Calls++
	if s.attempts > 1 {
		a.Retried++
		a.Retries += s.attempts - 1
	}
	switch s.outcome {
	case OutcomeRunning:
		a.Running++
		return
	case OutcomeInterrupted:
		a.Interrupted++
		return
	case retry.OutcomeOK:
		a.OK++
	case retry.OutcomeGaveUp:
		a.GaveUp++
	case retry.OutcomeStopped:
		a.QuotaStops++
	case retry.OutcomeFailed:
		a.Failed++
	case retry.OutcomeDeferred:
		a.Deferred++
	case retry.OutcomeCancelled:
		a.Cancelled++
	}
	a.lat.add(s.latency)
}

func (a *statAcc) finish() ProviderStats {
	s := a.ProviderStats
	if s.Calls > 0 {
		s.RetriedShare = float64(s.Retried) / float64(s.Calls)
		s.RetriesPerCall = float64(s.Retries) / float64(s.Calls)
		s.GiveUpRate = float64(s.GaveUp) / float64(s.Calls)
	}
	if a.lat.n > 0 {
		s.P50 = a.lat.percentile(0.50)
		s.P95 = a.lat.percentile(0.95)
		s.P50Ms = float64(s.P50) / 1e6
		s.P95Ms = float64(s.P95) / 1e6
	}
	return s
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// statsChunk is how many calls one of Stats' read transactions reads. Each
// transaction opens the file and maps it, and the pages it reads stay in
// the process's resident set until it closes: at 50,000 calls a chunk they
// were about 6 MiB of a 1 M-attempt stats run's 35 MiB peak; at 4,000 they
// are under 1 MiB, for about 110 opens of that file (10 ms more in all).
const statsChunk = 4000

// Stats computes per-provider numbers over the calls f selects (its Limit
// and BeforeID are ignored), sorted by provider, then the total (Provider "").
func (r *Reader) Stats(ctx context.Context, f Filter) ([]ProviderStats, error) {
	per := map[string]*statAcc{}
	total := &statAcc{}
	var since []byte
	if !f.Since.IsZero() {
		since = makeKey(f.Since, 0)
	}
	pclass := uint64(0)
	if f.Class != "" {
		pclass = classBit(f.Class)
	}
	// In chunks, each its own read transaction: memory (the mapped pages
	// a transaction touches included) stays bounded whatever the size,
	// and writers are never held up for long.
	chunk := r.chunk
	if chunk <= 0 {
		chunk = statsChunk
	}
	var md modes
	var tried triedCounter
	from := since
	first := true
	var err error
	for {
		n, done := 0, false
		var last []byte
		err = r.view(func(tx *bolt.Tx) error {
			if tx == nil || tx.Bucket(bCalls) == nil {
				done = true
				return nil
			}
			c := tx.Bucket(bCalls).Cursor()
			k, v := resumeAt(c, from, first)
			md.bySession = nil // a new transaction: sessions may have changed
			var s callStat
			var ac *bolt.Cursor // the attempts, to match a provider tried
			for ; k != nil; k, v = c.Next() {
				if n >= chunk {
					last = slices.Clone(k[:keyLen:keyLen])
					return nil
				}
				if n++; n&8191 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if err := decodeCallStat(k, v, &s); err != nil {
					return err
				}
				if f.Outcome != "" && s.outcome != f.Outcome {
					continue
				}
				if pclass != 0 && s.classes&pclass == 0 {
					continue
				}
				if f.Provider != "" {
					// Only when asked: the call in full, with its attempts.
					call, err := decodeCall(k, v, false)
					if err != nil {
						return err
					}
					if f.byTried() {
						if ac == nil {
							ac = attemptsCursor(tx)
						}
						if call.AttemptsList, err = readAttemptsAt(ac, k, call.Started, call.Chain, call.Attempts, nil); err != nil {
							return err
						}
					}
					if !f.providerMatch(call) {
						continue
					}
				}
				if f.Mode != "" && md.of(tx, modeFromBits(s.classes), s.session) != f.Mode {
					continue
				}
				if f.byOrigin() {
					route, client, err := readOrigin(k, v)
					if err != nil {
						return err
					}
					if !f.originMatch(route, client) {
						continue
					}
				}
				acc := accFor(per, s.provider)
				acc.add(&s)
				total.add(&s)
				if err := tried.count(tx, k, v, &s, func(p string) *statAcc { return accFor(per, p) }); err != nil {
					return err
				}
				if s.attempts > 0 {
					total.Tried++
				}
				if s.served != nil {
					accFor(per, s.served).Served++
					total.Served++
				}
			}
			done = true
			return nil
		})
		if err != nil || done {
			break
		}
		// Resume at the first call not read (Seek lands on it).
		from, first = last, true
	}
	if err != nil {
		return nil, fmt.Errorf("history stats: %w", err)
	}
	var out []ProviderStats
	for _, a := range per {
		out = append(out, a.finish())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	out = append(out, total.finish())
	return out, nil
}

// accFor is provider p's accumulator in per, made on first use (the
// lookup allocates nothing).
func accFor[S ~string | ~[]byte](per map[string]*statAcc, p S) *statAcc {
	acc := per[string(p)]
	if acc == nil {
		acc = &statAcc{ProviderStats: ProviderStats{Provider: string(p)}}
		per[acc.Provider] = acc
	}
	return acc
}

// triedCounter counts, per provider, the calls that sent it a request.
// A call answered at its first request by its primary tried only that
// provider, and one that sent none tried nothing: only the other calls
// (retries, failovers, calls nothing served) have their attempts read.
type triedCounter struct {
	ac       *bolt.Cursor // the attempts, in the current transaction
	tx       *bolt.Tx
	attempts []retry.Attempt
	seen     []string
}

// count adds call k's tried providers to acc's accumulators.
func (t *triedCounter) count(tx *bolt.Tx, k, v []byte, s *callStat, acc func(string) *statAcc) error {
	switch {
	case s.attempts == 0:
		return nil
	case s.attempts == 1 && s.served != nil && bytes.Equal(s.served, s.provider):
		acc(string(s.provider)).Tried++
		return nil
	}
	if t.tx != tx {
		t.tx, t.ac = tx, attemptsCursor(tx)
	}
	call, err := decodeCall(k, v, false)
	if err != nil {
		return err
	}
	if t.attempts, err = readAttemptsAt(t.ac, k, call.Started, call.Chain, call.Attempts, t.attempts[:0]); err != nil {
		return err
	}
	t.seen = t.seen[:0]
	for _, a := range t.attempts {
		if p := a.Target.Provider; p != "" && !slices.Contains(t.seen, p) {
			t.seen = append(t.seen, p)
			acc(p).Tried++
		}
	}
	return nil
}

// Each calls fn with every call f selects, oldest first, in full with its
// attempts and text (unless noText), for export. It reads in chunks of a
// few thousand calls, each its own read transaction, so a long export never
// holds writers up for long.
func (r *Reader) Each(ctx context.Context, f Filter, noText bool, fn func(*Call) error) error {
	return r.each(ctx, f, noText, false, fn)
}

// EachReused is Each with one Call (and its attempts' backing array)
// reused for every call: fn must not keep the call or its attempts after
// it returns. A loop that only writes each call out (history export)
// makes a fraction of Each's garbage.
func (r *Reader) EachReused(ctx context.Context, f Filter, noText bool, fn func(*Call) error) error {
	return r.each(ctx, f, noText, true, fn)
}

func (r *Reader) each(ctx context.Context, f Filter, noText, reuse bool, fn func(*Call) error) error {
	var dst *Call // reuse: the one call
	var atts []retry.Attempt
	if reuse {
		dst = &Call{}
	}
	const chunk = 2000
	var from []byte // the next chunk starts after this key
	if !f.Since.IsZero() {
		from = makeKey(f.Since, 0)
	}
	first := true
	count := 0
	var spare []byte // the buffer the next chunk's last key goes to
	for {
		n := 0
		last := spare[:0]
		done := false
		err := r.view(func(tx *bolt.Tx) error {
			if tx == nil || tx.Bucket(bCalls) == nil {
				done = true
				return nil
			}
			c := tx.Bucket(bCalls).Cursor()
			k, v := resumeAt(c, from, first)
			text := tx.Bucket(bText)
			ac := attemptsCursor(tx)
			var md modes
			for ; k != nil; k, v = c.Next() {
				if n >= chunk {
					return nil
				}
				n++
				last = append(last[:0], k...) // a buffer of its own: from holds the previous chunk's
				if ctx.Err() != nil {
					return ctx.Err()
				}
				call, _, err := decodeCallInto(dst, k, v, false)
				if err != nil {
					return err
				}
				if reuse {
					clear(atts[:cap(atts)]) // keep no earlier call's text alive
				}
				if call.AttemptsList, err = readAttemptsAt(ac, k, call.Started, call.Chain, call.Attempts, atts[:0]); err != nil {
					return err
				}
				if !f.match(call) || !f.originMatch(call.Route, call.Client) {
					continue
				}
				if f.Mode != "" && md.of(tx, call.Mode, call.Session) != f.Mode {
					continue
				}
				if reuse && cap(call.AttemptsList) > cap(atts) {
					atts = call.AttemptsList
				}
				if !noText {
					fillText(text, k, v, call)
				}
				if err := fn(call); err != nil {
					return err
				}
				if count++; f.Limit > 0 && count >= f.Limit {
					done = true
					return nil
				}
			}
			done = true
			return nil
		})
		if err != nil {
			return err
		}
		if done || len(last) == 0 {
			return nil
		}
		from, spare, first = last, from, false
	}
}

// fillText reads a call's prompt, answer and partial texts.
func fillText(text *bolt.Bucket, k, v []byte, call *Call) {
	if len(v) > 0 && v[0] == 1 {
		if _, j, err := decodeCallV1Full(k, v); err == nil {
			call.Prompt, call.Text = j.Prompt, j.Text
		}
	}
	if text == nil {
		return
	}
	if p := text.Get(textKey(k, textPrompt, 0)); p != nil {
		call.Prompt = string(p)
	}
	if a := text.Get(textKey(k, textAnswer, 0)); a != nil {
		call.Text = string(a)
		call.TextCut = text.Get(textKey(k, textCut, 0)) != nil
	}
	for i := range call.AttemptsList {
		if p := text.Get(textKey(k, textPartial, call.AttemptsList[i].N)); p != nil {
			call.AttemptsList[i].PartialText = string(p)
		}
	}
}

// Session returns one stored session by id.
func (r *Reader) Session(ctx context.Context, id uint32) (*Session, error) {
	var out *Session
	err := r.view(func(tx *bolt.Tx) error {
		if tx == nil || tx.Bucket(bSessions) == nil {
			return nil
		}
		c := tx.Bucket(bSessions).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if keySeq(k) != id {
				continue
			}
			s, err := decodeSession(k, v)
			if err != nil {
				return err
			}
			out = s
			return nil
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("session %d: %w", id, err)
	}
	if out == nil {
		return nil, fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	return out, nil
}

// Sessions returns the stored sessions, newest first.
func (r *Reader) Sessions(ctx context.Context, limit int) ([]Session, error) {
	var out []Session
	err := r.view(func(tx *bolt.Tx) error {
		if tx == nil || tx.Bucket(bSessions) == nil {
			return nil
		}
		c := tx.Bucket(bSessions).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			s, err := decodeSession(k, v)
			if err != nil {
				return err
			}
			out = append(out, *s)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return out, nil
}

// resumeAt positions a calls cursor for the next chunk of a read split over
// transactions: at the start (no from), at from itself on the first chunk,
// else just past from (the last key the previous chunk read).
func resumeAt(c *bolt.Cursor, from []byte, first bool) (k, v []byte) {
	switch {
	case from == nil:
		return c.First()
	case first:
		return c.Seek(from)
	}
	if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
		return c.Next()
	}
	return k, v
}
