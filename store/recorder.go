package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Options tune a Recorder. Zero fields take the defaults.
type Options struct {
	LockTimeout time.Duration // wait for another process's lock (default 2s)
	BatchDelay  time.Duration // longest a non-final event waits to be committed (default 250ms)
	BatchSize   int           // commit at once when this many events are queued (default 4096)
	RetryDelay  time.Duration // first wait after a failed commit, doubling up to 30s (default 1s)
	// Retention deletes calls older than this in the background, starting
	// RetentionDelay after the recorder starts (default 90 days, 10s);
	// negative keeps everything.
	Retention      time.Duration
	RetentionDelay time.Duration
	// OnWarn is called (from the recorder's goroutine) with the first error
	// of every run of failed commits: a locked, corrupt or newer file. The
	// events stay queued. Show it on stderr or the status line; it never
	// changes an exit code.
	OnWarn func(error)
	Now    func() time.Time // default time.Now
	// CooldownCache is how long Cooldowns.Get answers from its last read of
	// the file, so a call's start does not open it (default 1s; negative:
	// read every time). Another process's new cooldown is seen this late.
	CooldownCache time.Duration
	// JournalAfter is how long Close waits for the file's lock before it
	// writes what is queued to a journal instead (default 500ms; see
	// JournalDir). The journal is merged by the next writer.
	JournalAfter time.Duration
	// GroupDelay is how long a commit asked for (a Flush, or a call's end
	// in the background) waits when another was asked for within groupBusy
	// (calls ending close together: the proxy under load), so that they
	// share one transaction and its syncs (default DefaultGroupDelay;
	// negative: never). One asked for alone goes at once.
	GroupDelay time.Duration
}

// DefaultGroupDelay is Options.GroupDelay's default: about what one
// commit's sync takes, so that under load a commit's cost is spread over
// the calls ending while it waits.
const DefaultGroupDelay = time.Millisecond

// groupBusy is how close together two commits must be asked for for the
// later to wait GroupDelay.
const groupBusy = 10 * time.Millisecond

func (o *Options) fill() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = 250 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 4096
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.RetentionDelay <= 0 {
		o.RetentionDelay = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CooldownCache == 0 {
		o.CooldownCache = time.Second
	}
	if o.GroupDelay == 0 {
		o.GroupDelay = DefaultGroupDelay
	}
	if o.JournalAfter <= 0 {
		o.JournalAfter = 500 * time.Millisecond
	}
}

// MaxPartialText is the most partial text stored for one attempt (the text
// of a stream that broke, or was cut for its size), in bytes: a longer one
// is cut at a rune boundary, and the record keeps its first MaxPartialText
// bytes. The answer of a call that succeeded is not cut (the stream's own
// size cap bounds it).
const MaxPartialText = 1 << 20

// capText returns s cut to at most n bytes, at a rune boundary.
func capText(s string, n int) []byte {
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return []byte(s)
}

// DefaultRetention is how long calls are kept unless told otherwise.
const DefaultRetention = 90 * 24 * time.Hour

// item is one queued event and, for the first event of a call recorded
// through Sink, the call itself (its prompt and policy).
type item struct {
	ev   retry.Event
	call *retry.Call
}

// callState is an in-flight call: its key once committed and its record.
type callState struct {
	key      []byte
	rec      Call
	attempts []*retry.Attempt // dirty attempts of this batch (the queue's copies); a later one of the same N wins
	ended    bool
	isNew    bool
}

// Recorder writes the engine's events to the history file off the caller's
// path. It is safe for concurrent use; Record never blocks on the file.
type Recorder struct {
	path string
	info SessionInfo
	opts Options
	file *fileHold // serialises this process's uses of the file, and holds it open between close commits

	mu     sync.Mutex
	queue  queue
	flying int // taken by the commit in progress
	urgent bool
	infos  map[string]*retry.Call // from RecordCall, until the call's first event
	closed bool
	warned bool // the last commit failed, and OnWarn was told
	// journal is the journal Close wrote ("" if none): the recorder is then
	// spent, and later events are dropped (the journal's merge decides
	// their calls' records).
	journal string
	cools   []*Cooldowns // handed out by Cooldowns: their unsaved changes go with the commits
	// enqueued counts the events queued so far; durable is the count of
	// them that a commit has put on disk (every event queued before a
	// commit took the queue). A Flush whose events a commit that finished
	// meanwhile took returns without one of its own: many calls ending at
	// once (the proxy under load) share a transaction and its syncs.
	enqueued, durable uint64

	// commitSem lets one commit at a time (a channel rather than a mutex:
	// a commit can wait long, for the lock or standing aside for a waiter,
	// and a goroutine blocked on a channel is idle to testing/synctest).
	commitSem  chan struct{}
	lastAsk    atomic.Int64 // when a commit was last asked for (Flush, a call's end), in Unix nanoseconds
	commits    atomic.Int64 // transactions committed (tests read it)
	sessDirty  bool         // the session's end is not written yet (guarded by mu)
	calls      map[string]*callState
	sessionKey []byte
	session    Session

	wake     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	stopOnce sync.Once
}

// NewRecorder starts a recorder for the file at path. It touches nothing
// until the first batch; retention runs later, in the background.
func NewRecorder(path string, sess SessionInfo, opts Options) *Recorder {
	opts.fill()
	r := &Recorder{
		path:      path,
		info:      sess,
		opts:      opts,
		file:      newFileHold(path, true),
		commitSem: make(chan struct{}, 1),
		calls:     map[string]*callState{},
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	r.session = Session{Started: opts.Now(), Version: sess.Version, Mode: sess.Mode, Command: sess.Command, PID: os.Getpid(), NoContent: sess.NoContent}
	r.session.Boot, r.session.ProcStart = procIdentity(os.Getpid())
	go r.loop()
	return r
}

// Path is the file the recorder writes.
func (r *Recorder) Path() string { return r.path }

// Cooldowns returns the file's cooldowns, sharing this recorder's file
// access so the two never wait on each other's lock. A cooldown that could
// not be written when it was set is written with the recorder's next
// commit, or journaled by Close.
func (r *Recorder) Cooldowns() *Cooldowns {
	c := &Cooldowns{path: r.path, timeout: r.opts.LockTimeout, now: r.opts.Now, file: r.file, mem: map[string]retry.Cooldown{}, ttl: r.opts.CooldownCache}
	r.mu.Lock()
	r.cools = append(r.cools, c)
	r.mu.Unlock()
	return c
}

// Journal is the journal Close wrote, "" when everything was committed.
func (r *Recorder) Journal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.journal
}

// Record queues one event. Text events are not stored one by one (the
// call's end carries the text) and are dropped here; the rest are kept
// until committed: within BatchDelay, at once for a call's end. It never
// waits on the file. After Close, events wait for the next Flush or Close.
func (r *Recorder) Record(ev retry.Event) { r.record(ev, nil) }

// RecordCall registers call c (its prompt, policy, chain, and the route and
// client a proxied call carries) for its
// events, which do not carry them: the next event recorded with c.ID takes
// it. Use it, or Sink, before the engine runs the call. c.ID must be set.
func (r *Recorder) RecordCall(c retry.Call) {
	if c.ID == "" {
		return
	}
	r.mu.Lock()
	if r.infos == nil || len(r.infos) >= 10000 { // calls registered but never run
		r.infos = map[string]*retry.Call{}
	}
	r.infos[c.ID] = &c
	r.mu.Unlock()
}

// Sink returns an engine sink for call c that records its prompt, policy,
// route and client with its events, then passes each event to next (which may be nil).
func (r *Recorder) Sink(c retry.Call, next func(retry.Event)) func(retry.Event) {
	first := true
	cc := c
	return func(ev retry.Event) {
		if first && ev.Kind != retry.EventText {
			first = false
			r.record(ev, &cc)
		} else {
			r.record(ev, nil)
		}
		if next != nil {
			next(ev)
		}
	}
}

func (r *Recorder) record(ev retry.Event, c *retry.Call) {
	if ev.Kind == retry.EventText || ev.Kind == retry.EventThinking || ev.Kind == retry.EventUsage {
		return // the attempt's end carries what is kept of them
	}
	// Copy what the engine points at, so later changes cannot race.
	if ev.Attempt != nil {
		a := *ev.Attempt
		ev.Attempt = &a
	}
	if ev.Result != nil {
		res := *ev.Result
		res.Attempts = slices.Clone(res.Attempts)
		ev.Result = &res
	}
	ev.Chain = slices.Clone(ev.Chain)
	r.mu.Lock()
	if r.journal != "" {
		r.mu.Unlock()
		return
	}
	if c == nil && len(r.infos) > 0 {
		if reg, ok := r.infos[ev.CallID]; ok {
			c = reg
			delete(r.infos, ev.CallID)
		}
	}
	r.queue.push(item{ev: ev, call: c})
	r.enqueued++
	urgent := ev.Kind == retry.EventCallEnd || r.queue.n >= r.opts.BatchSize
	if urgent {
		r.urgent = true
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Pending is the number of events not yet committed.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queue.n + r.flying
}

// group waits GroupDelay when another commit was asked for within
// groupBusy (calls ending close together: a proxy under load), so that the
// calls ending meanwhile share one transaction and its syncs; a commit
// asked for alone goes at once.
func (r *Recorder) group(ctx context.Context) {
	now := time.Now().UnixNano()
	if prev := r.lastAsk.Swap(now); r.opts.GroupDelay <= 0 || now-prev >= int64(groupBusy) {
		return
	}
	t := time.NewTimer(r.opts.GroupDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Flush commits every event queued so far and returns once they are on
// disk (bbolt syncs every commit), so a caller can acknowledge them: the
// proxy flushes before it ends a response. It waits for another process's
// lock until ctx ends when ctx has a deadline, retrying as long as the file
// is only locked; without a deadline it waits at most Options.LockTimeout.
// Any other failure (a corrupt file, a full disk) returns at once. On error
// the events stay queued for a later Flush or Close.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	need := r.enqueued
	r.mu.Unlock()
	r.group(ctx)
	for {
		err := r.commit(ctx, r.opts.LockTimeout, need)
		if err == nil {
			return nil
		}
		if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil || !errors.Is(err, ErrLocked) {
			return err
		}
	}
}

// Close stops the background writer, then commits what is queued with the
// session's end. When the file stays locked for Options.JournalAfter (other
// writers hold it, or ctx ends sooner), what is queued is written to a
// journal beside the file instead (see JournalDir), which the next writer
// merges; Close then returns nil. Only when the journal fails too (a full
// disk, a read-only directory) does it keep retrying the locked file until
// ctx ends (see Flush). Any other failure (a corrupt or newer file, a full
// disk) returns at once. Events it could not save are reported as an error
// and kept: a later Flush or Close tries again.
func (r *Recorder) Close(ctx context.Context) error {
	defer func() {
		r.file.Lock()
		r.file.release()
		r.file.Unlock()
	}()
	// The session's end first: a commit of the background writer that is
	// waiting for the lock then writes it too, in the same transaction.
	r.mu.Lock()
	spent := r.journal != ""
	if !spent {
		r.session.Ended = r.opts.Now()
		r.sessDirty = true
	}
	r.mu.Unlock()
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stop)
		<-r.loopDone
	})
	if spent {
		return nil
	}
	short, cancel := context.WithTimeout(ctx, r.opts.JournalAfter)
	err := r.Flush(short)
	cancel()
	if err == nil && r.Pending() == 0 {
		return nil
	}
	var jerr error
	if errors.Is(err, ErrLocked) {
		if jerr = r.writeJournal(); jerr == nil {
			return nil
		}
		err = r.Flush(ctx)
	}
	if n := r.Pending(); n > 0 {
		if jerr != nil {
			return fmt.Errorf("history: %d events not saved (kept in memory; %v): %w", n, jerr, err)
		}
		return fmt.Errorf("history: %d events not saved (kept in memory): %w", n, err)
	}
	return err
}

// writeJournal writes every queued event, with the state of the calls
// already committed and the unsaved cooldowns, to a new journal. On
// success the queue is empty and the recorder spent.
func (r *Recorder) writeJournal() error {
	r.commitSem <- struct{}{}
	defer func() { <-r.commitSem }()
	r.mu.Lock()
	items := r.queue
	r.queue = queue{free: items.free}
	items.free = nil
	r.flying = items.n
	h := journalHeader{Info: r.info, Session: r.session, SessionKey: r.sessionKey, Written: r.opts.Now()}
	cools := slices.Clone(r.cools)
	r.mu.Unlock()
	restore := func() {
		r.mu.Lock()
		r.queue.prepend(&items)
		r.flying = 0
		r.mu.Unlock()
	}
	if h.SessionKey == nil && h.Session.Ended.IsZero() && items.n == 0 {
		restore()
		return nil
	}
	for id, cs := range r.calls {
		h.Calls = append(h.Calls, journalCall{ID: id, Key: cs.key, Rec: cs.rec})
	}
	pends := pendingCooldowns(cools)
	for _, p := range pends {
		for _, cd := range p.mem {
			h.Cooldowns = append(h.Cooldowns, cd)
		}
		for scope := range p.cleared {
			h.Cleared = append(h.Cleared, scope)
		}
	}
	jitems := make([]journalItem, 0, items.n)
	for it := range items.all() {
		jitems = append(jitems, journalItemOf(it, r.info.NoContent))
	}
	data, err := encodeJournal(&h, jitems)
	var name string
	if err == nil {
		name, err = writeJournal(r.path, data)
	}
	if err != nil {
		restore()
		return fmt.Errorf("journal: %w", err)
	}
	r.mu.Lock()
	r.queue.recycle(&items)
	r.flying = 0
	r.sessDirty = false
	r.journal = name
	r.mu.Unlock()
	savedCooldowns(pends)
	return nil
}

// cooldownChanges are one Cooldowns' sets and clears not yet written.
type cooldownChanges struct {
	c       *Cooldowns
	mem     map[string]retry.Cooldown
	cleared map[string]bool
}

// pendingCooldowns collects the unsaved changes of cools.
func pendingCooldowns(cools []*Cooldowns) []cooldownChanges {
	var out []cooldownChanges
	for _, c := range cools {
		if mem, cleared := c.pending(); len(mem)+len(cleared) > 0 {
			out = append(out, cooldownChanges{c, mem, cleared})
		}
	}
	return out
}

// savedCooldowns tells each Cooldowns that its changes were written.
func savedCooldowns(pends []cooldownChanges) {
	for _, p := range pends {
		p.c.saved(p.mem, p.cleared)
	}
}

func (r *Recorder) loop() {
	defer close(r.loopDone)
	// Close ends a commit that waits for the lock at once: Close then
	// makes its own try, and journals.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Since Go 1.23 Reset never delivers a stale tick.
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		failing    bool
		retryWait  time.Duration
		retryAt    time.Time
		pruneAt    = time.Now().Add(r.opts.RetentionDelay)
		pruneDone  = r.opts.Retention < 0
		oldestSeen time.Time
	)
	arm := func(d time.Duration) { timer.Reset(max(d, 0)) }
	if pruneDone {
		timer.Stop()
	} else {
		arm(r.opts.RetentionDelay)
	}
	for {
		select {
		case <-r.wake:
		case <-timer.C:
		case <-r.stop:
			return
		}
		now := time.Now() // scheduling runs on the wall clock; records use opts.Now
		r.mu.Lock()
		n, urgent := r.queue.n, r.urgent
		r.mu.Unlock()
		if n > 0 && oldestSeen.IsZero() {
			oldestSeen = now
		}
		due := urgent || (n > 0 && now.Sub(oldestSeen) >= r.opts.BatchDelay)
		if failing && now.Before(retryAt) {
			arm(retryAt.Sub(now))
			continue
		}
		if !due {
			if n > 0 {
				arm(r.opts.BatchDelay - now.Sub(oldestSeen))
			} else if !pruneDone && !now.Before(pruneAt) && !failing {
				// One chunk at a time, between batches; a pass repeats daily
				// for a long session, and hourly after an error.
				more, err := r.pruneChunk(r.opts.Now())
				switch {
				case err != nil:
					pruneAt = now.Add(time.Hour)
					arm(time.Hour)
				case more:
					arm(0)
				default:
					pruneAt = now.Add(24 * time.Hour)
					arm(24 * time.Hour)
				}
			} else if !pruneDone {
				arm(pruneAt.Sub(now))
			}
			continue
		}
		if urgent {
			r.group(ctx)
		}
		err := r.commit(ctx, r.opts.LockTimeout, commitAlways)
		if err != nil {
			if !failing {
				retryWait = r.opts.RetryDelay
			} else if retryWait *= 2; retryWait > 30*time.Second {
				retryWait = 30 * time.Second
			}
			failing = true
			retryAt = time.Now().Add(retryWait)
			arm(retryWait)
			continue
		}
		failing = false
		oldestSeen = time.Time{}
		r.mu.Lock()
		more := r.queue.n > 0
		r.mu.Unlock()
		if more {
			arm(0)
		} else if !pruneDone {
			arm(max(0, time.Until(pruneAt)))
		}
	}
}

func (r *Recorder) pruneChunk(now time.Time) (bool, error) {
	r.file.Lock()
	defer r.file.Unlock()
	r.file.release() // pruneOnce opens the file on its own
	n, err := pruneOnce(r.path, r.opts.LockTimeout, now.Add(-r.opts.Retention), pruneChunkSize)
	return n >= pruneChunkSize, err
}

type kv struct{ k, v []byte }

// commitAlways is commit's need for a commit whatever is already durable.
const commitAlways = ^uint64(0)

// commit writes every queued event, and the session's record when it
// changed, in one transaction. The queue is taken once the file is held, so
// what arrived while it waited for the lock goes in the same commit. need
// is the count of queued events the caller needs on disk: when a commit
// that finished while this one waited for its turn put them there (and no
// session end or cooldown waits), there is nothing to do.
func (r *Recorder) commit(ctx context.Context, timeout time.Duration, need uint64) error {
	r.commitSem <- struct{}{}
	defer func() { <-r.commitSem }()
	r.mu.Lock()
	sessWork := r.sessDirty && r.sessionKey != nil
	work := r.queue.n > 0 || sessWork
	covered := need != commitAlways && r.durable >= need && !sessWork
	cools := slices.Clone(r.cools)
	r.mu.Unlock()
	pends := pendingCooldowns(cools)
	if (!work || covered) && len(pends) == 0 {
		return nil
	}
	var items queue
	var takenUpTo uint64 // the events queued when the queue was taken
	taken := false
	var touched map[string]*callState
	var sessionKey []byte
	var wroteEnd bool
	r.file.Lock()
	err := r.file.update(ctx, timeout, true, func(tx *bolt.Tx) error {
		for _, p := range pends {
			if err := writeCooldowns(tx, p.mem, p.cleared); err != nil {
				return err
			}
		}
		if !taken {
			r.mu.Lock()
			items = r.queue
			takenUpTo = r.enqueued
			r.queue = queue{free: items.free}
			items.free = nil
			r.urgent = false
			r.flying = items.n
			r.mu.Unlock()
			taken = true
		}
		var err error
		touched, sessionKey, wroteEnd, err = r.apply(tx, &items, false)
		return err
	})
	r.file.Unlock()
	r.mu.Lock()
	// A wait Close cut short (the background commit's, or its own short try
	// before it journals) is not worth a warning: Close says what it could
	// not save.
	warn := err != nil && !r.warned && !(r.closed && ctx.Err() != nil)
	r.warned = err != nil
	r.mu.Unlock()
	if warn && r.opts.OnWarn != nil {
		r.opts.OnWarn(err)
	}
	if err != nil {
		if taken {
			r.mu.Lock()
			r.queue.prepend(&items)
			r.flying = 0
			r.mu.Unlock()
		}
		return err
	}
	savedCooldowns(pends)
	r.commits.Add(1)
	r.mu.Lock()
	r.queue.recycle(&items)
	r.flying = 0
	if taken && takenUpTo > r.durable {
		r.durable = takenUpTo
	}
	if wroteEnd {
		r.sessDirty = false
	}
	r.mu.Unlock()
	r.sessionKey = sessionKey
	for id, cs := range touched {
		cs.attempts = nil
		cs.isNew = false
		if cs.ended {
			delete(r.calls, id)
		} else {
			r.calls[id] = cs
		}
	}
	return nil
}

// apply turns a batch of events into records in tx. It changes no recorder
// state: the touched calls are returned and kept only if tx commits. A
// journal's replay (fromJournal) leaves dead processes' calls to the
// merging recorder's own first commit.
func (r *Recorder) apply(tx *bolt.Tx, items *queue, fromJournal bool) (touchedCalls map[string]*callState, sessKey []byte, wroteEnd bool, err error) {
	sessions, calls := bucket(tx, bSessions), bucket(tx, bCalls)
	ids, attempts, text := bucket(tx, bIDs), bucket(tx, bAttempts), bucket(tx, bText)
	noContent := r.info.NoContent

	sessionKey := r.sessionKey
	r.mu.Lock()
	s, dirty := r.session, r.sessDirty
	r.mu.Unlock()
	if sessionKey == nil {
		// The first commit: close what dead processes left running.
		if !fromJournal {
			if _, err := closeInterrupted(tx, r.session.Boot); err != nil {
				return nil, nil, false, err
			}
		}
		seq, err := sessions.NextSequence()
		if err != nil {
			return nil, nil, false, fmt.Errorf("session id: %w", err)
		}
		sessionKey = makeKey(r.session.Started, uint32(seq))
		dirty = true
	}
	if dirty {
		if err := sessions.Put(sessionKey, encodeSession(&s)); err != nil {
			return nil, nil, false, fmt.Errorf("write session: %w", err)
		}
		wroteEnd = !s.Ended.IsZero()
	}
	sessionID := keySeq(sessionKey)

	touched := map[string]*callState{}
	var order []*callState
	var textPuts []kv
	get := func(ev *retry.Event) (*callState, error) {
		// A call id used again after its call ended starts a new record.
		if cs, ok := touched[ev.CallID]; ok && !(cs.ended && ev.Kind == retry.EventCallStart) {
			return cs, nil
		}
		if cs, ok := r.calls[ev.CallID]; ok {
			c := *cs
			c.attempts = nil
			touched[ev.CallID] = &c
			order = append(order, &c)
			return &c, nil
		}
		seq, err := calls.NextSequence()
		if err != nil {
			return nil, fmt.Errorf("call id: %w", err)
		}
		t := ev.Time
		if t.IsZero() {
			t = r.opts.Now()
		}
		cs := &callState{key: makeKey(t, uint32(seq)), isNew: true}
		cs.rec = Call{ID: uint32(seq), CallID: ev.CallID, Session: sessionID, Started: keyTime(cs.key), Outcome: OutcomeRunning, Mode: r.info.Mode}
		touched[ev.CallID] = cs
		order = append(order, cs)
		return cs, nil
	}
	for it := range items.all() {
		ev := &it.ev
		cs, err := get(ev)
		if err != nil {
			return nil, nil, false, err
		}
		c := &cs.rec
		if it.call != nil {
			c.Policy, c.MaxTokens = it.call.Policy, it.call.MaxTokens
			// The deadline the call ran under: a default one makes room
			// for a flex target's timeout.
			c.Policy.Deadline = retry.CallDeadline(c.Policy, it.call.Chain)
			// Metadata, kept with --no-content too; never a credential.
			c.Route, c.Client = cleanOrigin(it.call.Route), cleanOrigin(it.call.Client)
			if len(c.Chain) == 0 {
				c.Chain = slices.Clone(it.call.Chain)
			}
			if it.call.Prompt != "" && !noContent {
				c.HasPrompt = true
				textPuts = append(textPuts, kv{textKey(cs.key, textPrompt, 0), []byte(it.call.Prompt)})
			}
		}
		switch ev.Kind {
		case retry.EventCallStart:
			if len(ev.Chain) > 0 {
				c.Chain = ev.Chain
			}
		case retry.EventAttemptEnd:
			if ev.Attempt == nil {
				continue
			}
			cs.attempts = append(cs.attempts, ev.Attempt)
			if ev.Attempt.N > c.Attempts {
				c.Attempts = ev.Attempt.N
			}
			c.Classes = append(c.Classes, ev.Attempt.Class)
		case retry.EventCallEnd:
			res := ev.Result
			if res == nil {
				continue
			}
			cs.ended = true
			endCall(c, res, ev.Time)
			for i := range res.Attempts {
				cs.attempts = append(cs.attempts, &res.Attempts[i])
			}
			if res.Text != "" && !noContent {
				c.HasText = true
				textPuts = append(textPuts, kv{textKey(cs.key, textAnswer, 0), []byte(res.Text)})
				if res.TextTruncated {
					textPuts = append(textPuts, kv{textKey(cs.key, textCut, 0), []byte{1}})
				}
			}
		}
	}

	var ar arena
	var scratch enc
	callPuts := make([]kv, 0, len(order))
	var attPuts, idPuts []kv
	for _, cs := range order {
		scratch.b = scratch.b[:0]
		encodeCallInto(&scratch, &cs.rec)
		callPuts = append(callPuts, kv{cs.key, ar.copy(scratch.b)})
		if cs.isNew {
			idPuts = append(idPuts, kv{ar.copy(seqKey(cs.rec.ID)), cs.key})
		}
		for i, a := range cs.attempts {
			if slices.ContainsFunc(cs.attempts[i+1:], func(b *retry.Attempt) bool { return b.N == a.N }) {
				continue // a later copy of the same attempt wins
			}
			scratch.b = scratch.b[:0]
			encodeAttemptInto(&scratch, a, cs.rec.Started, cs.rec.Chain)
			k := ar.copy2(cs.key, []byte{byte(a.N >> 8), byte(a.N)})
			attPuts = append(attPuts, kv{k, ar.copy(scratch.b)})
			if a.PartialText != "" && !noContent {
				textPuts = append(textPuts, kv{textKey(cs.key, textPartial, a.N), capText(a.PartialText, MaxPartialText)})
			}
		}
	}
	for _, set := range []struct {
		b   *bolt.Bucket
		kvs []kv
	}{{calls, callPuts}, {ids, idPuts}, {attempts, attPuts}, {text, textPuts}} {
		if err := putSorted(set.b, set.kvs); err != nil {
			return nil, nil, false, err
		}
	}
	return touched, sessionKey, wroteEnd, nil
}

// endCall fills a call's record from the engine's result.
func endCall(c *Call, res *retry.Result, at time.Time) {
	c.Outcome = res.Outcome
	if c.Outcome == "" {
		c.Outcome = retry.OutcomeFailed
	}
	c.Ended = res.Ended
	if c.Ended.IsZero() {
		c.Ended = at
	}
	if c.Ended.Before(c.Started) {
		c.Ended = c.Started
	}
	if res.ServedBy != nil {
		sb := *res.ServedBy
		c.ServedBy = &sb
	}
	c.FinishReason = res.FinishReason
	if res.Usage != nil {
		u := *res.Usage
		c.Usage = &u
	}
	if res.Err != nil {
		c.Err = &CallError{Class: res.Err.Class, Status: res.Err.Status, Code: res.Err.Code, Message: res.Err.Message}
		if n := len(res.Attempts); n > 0 {
			c.Err.Provider = res.Attempts[n-1].Target.Provider
		}
	}
	c.RetryAt, c.CooldownUntil, c.CooldownHit = res.RetryAt, res.CooldownUntil, res.CooldownHit
	c.Attempts = len(res.Attempts)
	c.Waited, c.TTFT, c.Classes = 0, 0, nil
	for _, a := range res.Attempts {
		c.Waited += a.Waited + a.Paced
		c.Classes = append(c.Classes, a.Class)
		if a.Class == stream.ClassOK {
			c.TTFT = a.TTFT
		}
	}
	if c.CooldownHit && len(c.Classes) == 0 {
		c.Classes = []stream.Class{stream.ClassQuota}
	}
}

// putSorted writes kvs in key order (bbolt appends cheaply to the right).
func putSorted(b *bolt.Bucket, kvs []kv) error {
	if b == nil {
		return errors.New("bucket missing")
	}
	cmp := func(x, y kv) int { return bytes.Compare(x.k, y.k) }
	if !slices.IsSortedFunc(kvs, cmp) {
		slices.SortFunc(kvs, cmp)
	}
	for _, p := range kvs {
		if err := b.Put(p.k, p.v); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	return nil
}

// arena hands out stable copies from large chunks: bbolt keeps the slices
// given to Put until the transaction ends, and one chunk is far cheaper for
// the allocator and the collector than a slice per record. Its slices are
// never appended to.
type arena struct{ chunk []byte }

func (a *arena) copy(b []byte) []byte {
	return a.copy2(b, nil)
}

// copy2 returns a stable copy of b followed by c.
func (a *arena) copy2(b, c []byte) []byte {
	n := len(b) + len(c)
	if cap(a.chunk)-len(a.chunk) < n {
		a.chunk = make([]byte, 0, max(64<<10, n))
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	a.chunk = append(a.chunk, c...)
	return a.chunk[start:len(a.chunk):len(a.chunk)]
}

// queue holds events in fixed blocks, so a long queue (a locked file, a
// slow disk) grows without copying, and committed blocks are reused.
type queue struct {
	blocks [][]item
	n      int
	free   [][]item
}

const queueBlock = 1024

func (q *queue) push(it item) {
	if len(q.blocks) == 0 || len(q.blocks[len(q.blocks)-1]) == queueBlock {
		var b []item
		if k := len(q.free); k > 0 {
			b, q.free = q.free[k-1][:0], q.free[:k-1]
		} else {
			b = make([]item, 0, queueBlock)
		}
		q.blocks = append(q.blocks, b)
	}
	last := len(q.blocks) - 1
	q.blocks[last] = append(q.blocks[last], it)
	q.n++
}

// all yields every item in order.
func (q *queue) all() func(func(*item) bool) {
	return func(yield func(*item) bool) {
		for _, b := range q.blocks {
			for i := range b {
				if !yield(&b[i]) {
					return
				}
			}
		}
	}
}

// prepend puts p's items in front of q's (a failed commit's events go back
// before those that came since).
func (q *queue) prepend(p *queue) {
	q.blocks = append(p.blocks, q.blocks...)
	q.n += p.n
}

// recycle keeps a few of p's emptied blocks for reuse.
func (q *queue) recycle(p *queue) {
	for _, b := range p.blocks {
		if len(q.free) >= 64 {
			break
		}
		clear(b)
		q.free = append(q.free, b[:0])
	}
}
