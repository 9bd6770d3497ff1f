package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// Options configure a Fleet. The zero value takes the defaults.
type Options struct {
	// Timeout bounds the dial and every command (default 500ms): an
	// unreachable Redis costs a call at most this, once, before the state
	// falls back to local.
	Timeout time.Duration
	// Probe is how often a Redis found away is tried again (default 1s).
	Probe time.Duration
	// Warn is told, once per outage, that Redis is away, and once that it
	// is back (nil: silent). The sentences never carry a password.
	Warn func(msg string)
	// OnState, when set, is called with each change of reachability (tests
	// order on it).
	OnState func(up bool)
	// Getenv reads REDISCLI_AUTH, the password when the URL has none (nil:
	// os.Getenv).
	Getenv func(string) string
	// Now is the local clock (nil: time.Now).
	Now func() time.Time
	// Prefix starts every key (default "limitscope:").
	Prefix string
	// StreamLen bounds the events stream, approximately (default 10000).
	StreamLen int64
	// Host names this process in the fleet view (default os.Hostname).
	Host string
	// Command names what this process runs ("send", "proxy", ...).
	Command string
	// MaxReply bounds one reply from Redis, in bytes (default 1 MiB): a
	// reply that announces or sends more is refused before the client
	// library reads it, and the shared state falls back as when Redis is
	// unreachable.
	MaxReply int64
	// MaxValue bounds one value limitscope reads back (a stored stop, an
	// event), in bytes (default 16 KiB): a larger one is skipped, with a
	// warning once per key.
	MaxValue int64
	// Patience is how long commands may time out before the shared state
	// falls back (default 3s): a command with no answer in time runs on
	// local state alone, and only when no command has been answered for
	// Patience does a timeout take the whole state down. A refused or
	// broken connection, or a refused reply, takes it down at once.
	Patience time.Duration
	// StartHold is how long the first request to a target holds the
	// fleet's start gate when its answer is slow (default 2s): until a
	// first answer is in the shared state, the fleet sends one request to
	// a target at a time.
	StartHold time.Duration
	// StartPoll is how often a request waiting at the start gate looks
	// again (default 20ms).
	StartPoll time.Duration
	// RateMargin is the share of a target's rate the shared bucket leaves
	// unused (default 0.03; negative: none): paced at exactly the limit, a
	// fleet keeps a server's bucket near empty, and against a server that
	// charges rejected requests too (OpenAI's does) one early request then
	// starts a run of rejections; the margin lets the server's bucket fill.
	RateMargin float64
	// Heartbeat is how often the process says it is alive, for the fleet
	// view's process count (default 1s; a process is counted live for 5
	// heartbeats).
	Heartbeat time.Duration

	readBytes *atomic.Int64 // counts the bytes read from Redis (tests)
}

// Fleet is one process's connection to the shared state. Its methods are
// safe for concurrent use. Close it once.
type Fleet struct {
	rdb    *redis.Client
	opt    Options
	where  string // the URL without its password
	id     string // this process in the fleet: host/pid/random
	up     atomic.Bool
	skewNs atomic.Int64 // Redis clock minus local clock
	lastOK atomic.Int64 // local clock (ns) of the last answer from Redis

	warnMu sync.Mutex
	warned map[string]bool // keys whose bad value was warned about

	mu      sync.Mutex
	probing bool
	closed  bool
	resync  []func(ctx context.Context) // run when Redis is back

	done   chan struct{}
	wg     sync.WaitGroup
	events chan Event
}

// ParseURL checks a --state value and returns the go-redis options for it,
// with the password from the URL or, when it has none, from getenv's
// REDISCLI_AUTH. Its errors never quote the URL (it may hold a password).
// The shared state's own limits may be set in the URL's query (Knobs);
// they are checked here and left out of the go-redis options.
func ParseURL(raw string, getenv func(string) string) (*redis.Options, error) {
	opt, _, err := parseURL(raw, getenv)
	return opt, err
}

// Knobs are the shared state's limits a --state URL may set in its query
// (redis://HOST:PORT/DB?max_reply=2MiB&patience=5s): each overrides the
// Options field of the same meaning.
var Knobs = []string{"max_reply", "max_value", "patience", "timeout", "start_hold", "rate_margin"}

// parseURL is ParseURL, with the knobs the query set applied to a zero
// Options.
func parseURL(raw string, getenv func(string) string) (*redis.Options, Options, error) {
	var knobs Options
	u, err := url.Parse(raw)
	if err != nil {
		return nil, knobs, errors.New("not a URL (want redis://HOST:PORT/DB or rediss://...)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, knobs, fmt.Errorf("scheme %q: want redis:// or rediss://", u.Scheme)
	}
	if q := u.Query(); len(q) > 0 {
		if knobs, err = parseKnobs(q); err != nil {
			return nil, knobs, err
		}
		for _, k := range Knobs {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		raw = u.String()
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// go-redis's own messages name the part that is wrong; keep only
		// them, never the URL.
		return nil, knobs, fmt.Errorf("%s: %w", Redact(raw), errors.New(redactIn(err.Error(), u)))
	}
	if opt.Password == "" {
		if getenv == nil {
			getenv = os.Getenv
		}
		opt.Password = getenv("REDISCLI_AUTH")
	}
	return opt, knobs, nil
}

// parseKnobs reads the knobs in a --state URL's query; a bad value is an
// error naming its knob.
func parseKnobs(q url.Values) (Options, error) {
	var o Options
	size := func(k string, dst *int64) error {
		v := q.Get(k)
		n, err := parseSize(v)
		if err != nil || n < 1024 {
			return fmt.Errorf("%s=%q: want a size of at least 1KiB, such as 64KiB or 2MiB", k, v)
		}
		*dst = n
		return nil
	}
	dur := func(k string, dst *time.Duration) error {
		v := q.Get(k)
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a duration above zero, such as 500ms or 3s", k, v)
		}
		*dst = d
		return nil
	}
	var errs []error
	for k := range q {
		var err error
		switch k {
		case "max_reply":
			err = size(k, &o.MaxReply)
		case "max_value":
			err = size(k, &o.MaxValue)
		case "patience":
			err = dur(k, &o.Patience)
		case "timeout":
			err = dur(k, &o.Timeout)
		case "start_hold":
			err = dur(k, &o.StartHold)
		case "rate_margin":
			v := q.Get(k)
			f, perr := strconv.ParseFloat(v, 64)
			switch {
			case perr != nil || f < 0 || f >= 0.5:
				err = fmt.Errorf("%s=%q: want a share from 0 to under 0.5, such as 0.03", k, v)
			case f == 0:
				o.RateMargin = -1 // none
			default:
				o.RateMargin = f
			}
		}
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// parseSize reads a byte count: a whole number, optionally followed by
// KiB or MiB (or KB, MB, K, M, taken as binary too).
func parseSize(v string) (int64, error) {
	mult := int64(1)
	s := strings.TrimSpace(v)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("not a size: %q", v)
	}
	return n * mult, nil
}

// redactIn removes u's password from s.
func redactIn(s string, u *url.URL) string {
	if u.User == nil {
		return s
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return strings.ReplaceAll(s, pw, "xxxxx")
	}
	return s
}

// Redact returns a --state URL with its password replaced by "xxxxx", for
// display; a value that does not parse is shown as "redis://(invalid)".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "redis://(invalid)"
	}
	return u.Redacted()
}

// Open connects to the Redis at rawURL. Only a malformed URL is an error: an
// unreachable Redis gives a Fleet running on local state (Warn is told) that
// reconnects in the background.
func Open(ctx context.Context, rawURL string, o Options) (*Fleet, error) {
	ro, knobs, err := parseURL(rawURL, o.Getenv)
	if err != nil {
		return nil, fmt.Errorf("shared state URL: %w", err)
	}
	// The URL's knobs win over the caller's options.
	o.MaxReply = cmp.Or(knobs.MaxReply, o.MaxReply)
	o.MaxValue = cmp.Or(knobs.MaxValue, o.MaxValue)
	o.Patience = cmp.Or(knobs.Patience, o.Patience)
	o.Timeout = cmp.Or(knobs.Timeout, o.Timeout)
	o.StartHold = cmp.Or(knobs.StartHold, o.StartHold)
	o.RateMargin = cmp.Or(knobs.RateMargin, o.RateMargin)
	if o.Timeout <= 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.Probe <= 0 {
		o.Probe = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Prefix == "" {
		o.Prefix = "limitscope:"
	}
	if o.StreamLen <= 0 {
		o.StreamLen = 10000
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.MaxReply <= 0 {
		o.MaxReply = 1 << 20
	}
	if o.MaxValue <= 0 {
		o.MaxValue = 16 << 10
	}
	if o.Patience <= 0 {
		o.Patience = 3 * time.Second
	}
	if o.StartHold <= 0 {
		o.StartHold = 2 * time.Second
	}
	if o.StartPoll <= 0 {
		o.StartPoll = 20 * time.Millisecond
	}
	switch {
	case o.RateMargin == 0:
		o.RateMargin = 0.03
	case o.RateMargin < 0 || o.RateMargin >= 1:
		o.RateMargin = 0
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	ro.Dialer = checkedDialer(redis.NewDialer(ro), o.MaxReply, o.readBytes)
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	ro.PoolTimeout = o.Timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1 // no retries: a failure falls back at once
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	f := &Fleet{
		rdb:    redis.NewClient(ro),
		opt:    o,
		where:  Redact(rawURL),
		id:     processID(o.Host),
		done:   make(chan struct{}),
		events: make(chan Event, 1024),
		warned: map[string]bool{},
	}
	if err := f.ping(ctx); err != nil {
		f.down(err)
	} else {
		f.up.Store(true)
		f.notify(true)
	}
	f.beat("0") // counted live from the start
	f.wg.Add(2)
	go f.publish()
	go f.heartbeat()
	return f, nil
}

// quiet is go-redis's logger for limitscope: its pool logs dial failures
// on stderr by itself, and the Fleet says what matters once (Warn).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// quietOnce installs quiet. go-redis has one logger per program, not per
// client; it is set once, before the first client, and never changed.
var quietOnce sync.Once

// processID names this process: host, pid and a random suffix.
func processID(host string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// ID is this process's name in the fleet view.
func (f *Fleet) ID() string { return f.id }

// Where is the Redis URL without its password.
func (f *Fleet) Where() string { return f.where }

// Up reports whether the shared state is in use (Redis answered last).
func (f *Fleet) Up() bool { return f.up.Load() }

// key returns the full key of name.
func (f *Fleet) key(name string) string { return f.opt.Prefix + name }

// ping checks Redis and measures its clock against ours.
func (f *Fleet) ping(ctx context.Context) error {
	before := f.opt.Now()
	var t time.Time
	err := f.call(ctx, func(c context.Context) (err error) {
		t, err = f.rdb.Time(c).Result()
		return err
	})
	if err != nil {
		return err
	}
	after := f.opt.Now()
	f.answered()
	mid := before.Add(after.Sub(before) / 2)
	f.skewNs.Store(int64(t.Sub(mid)))
	return nil
}

// redisNow is the local clock read as Redis's.
func (f *Fleet) redisNow() time.Time {
	return f.opt.Now().Add(time.Duration(f.skewNs.Load()))
}

// localTime converts a Redis clock reading to the local clock.
func (f *Fleet) localTime(t time.Time) time.Time {
	return t.Add(-time.Duration(f.skewNs.Load()))
}

// call runs one command (or pipeline, or script) bounded by the timeout. A
// panic inside the client library (a reply it could not take) is recovered
// and returned as a BadReplyError.
func (f *Fleet) call(parent context.Context, fn func(ctx context.Context) error) (err error) {
	return f.callFor(parent, f.opt.Timeout, fn)
}

// callFor is call with a timeout of its own (a blocking read's).
func (f *Fleet) callFor(parent context.Context, d time.Duration, fn func(ctx context.Context) error) (err error) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = &BadReplyError{What: fmt.Sprintf("the Redis client failed reading it (%v)", r)}
		}
	}()
	return fn(ctx)
}

// answered records that Redis answered now.
func (f *Fleet) answered() { f.lastOK.Store(f.opt.Now().UnixNano()) }

// failed takes the outcome of a Redis command: nil and redis.Nil mean Redis
// answered. A refused reply, a broken connection or a refused dial take the
// shared state down until the probe finds it back; a timeout does so only
// when nothing has been answered for Patience (one slow reply is not an
// outage: the command alone runs on local state). The caller's own
// cancellation and Redis's error replies leave it up. It reports whether
// err was a failure of any kind (the caller then uses local state).
func (f *Fleet) failed(ctx context.Context, err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		f.answered()
		return false
	}
	if isBadReply(err) {
		f.down(err)
		return true
	}
	if ctx != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
		return true // the caller gave up: not Redis's fault
	}
	var re redis.Error
	if errors.As(err, &re) && !isConnError(err) {
		f.answered()
		return true // Redis answered with an error (a script bug, a key of another type): not an outage
	}
	if isTimeout(err) && f.patient() {
		return true
	}
	f.down(err)
	return true
}

// isTimeout reports whether err is a command that got no answer in time.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// patient reports whether Redis answered within the last Patience, so that
// a timeout is one slow reply rather than an outage.
func (f *Fleet) patient() bool {
	last := f.lastOK.Load()
	return last != 0 && f.opt.Now().UnixNano()-last < int64(f.opt.Patience)
}

// warnKey warns once about key's value (what says what is wrong with it).
func (f *Fleet) warnKey(key, what string) {
	f.warnMu.Lock()
	seen := f.warned[key]
	full := !seen && len(f.warned) >= maxWarnedKeys
	said := full && f.warned[""] // "" marks the cap said
	switch {
	case full && !said:
		f.warned[""] = true
	case !full:
		f.warned[key] = true
	}
	f.warnMu.Unlock()
	switch {
	case seen || said:
		return
	case full:
		f.warn(fmt.Sprintf("shared state at %s: more than %d keys hold values limitscope skips; no more warnings about them", f.where, maxWarnedKeys))
		return
	}
	f.warn(fmt.Sprintf("shared state at %s: the value under %s %s; skipped (this process uses its own state for it)",
		f.where, sanitize.Truncate(key, 200), sanitize.Truncate(what, 200)))
}

// maxWarnedKeys bounds the keys warned about one by one.
const maxWarnedKeys = 1024

func isConnError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "NOAUTH", "WRONGPASS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// down marks the shared state away, warns once for this outage and starts
// the probe.
func (f *Fleet) down(err error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.up.Store(false)
	start := !f.probing
	f.probing = true
	if start {
		f.wg.Add(1)
	}
	f.mu.Unlock()
	if start {
		what := "unreachable"
		if isBadReply(err) {
			what = "sent a bad reply"
		}
		f.warn(fmt.Sprintf("shared state at %s %s (%s); using this process's own state until it is back", f.where, what, describe(err)))
		f.notify(false)
		go f.probe()
	}
}

// describe is an error's text for a warning, without any password (go-redis
// errors never carry one; the URL is never in them).
func describe(err error) string {
	if isTimeout(err) {
		return "no answer in time"
	}
	// Redis's own error texts and a refused reply's description are the
	// server's words: printable, one line, bounded.
	return sanitize.Truncate(strings.ReplaceAll(err.Error(), "\n", " "), 240)
}

func (f *Fleet) warn(msg string) {
	if f.opt.Warn != nil {
		f.opt.Warn(msg)
	}
}

func (f *Fleet) notify(up bool) {
	if f.opt.OnState != nil {
		f.opt.OnState(up)
	}
}

// probe tries Redis every Probe until it answers, then resyncs and marks
// the shared state up.
func (f *Fleet) probe() {
	defer f.wg.Done()
	t := time.NewTicker(f.opt.Probe)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
		}
		if err := f.ping(context.Background()); err != nil {
			continue
		}
		f.mu.Lock()
		hooks := append([]func(context.Context){}, f.resync...)
		f.mu.Unlock()
		for _, h := range hooks {
			h(context.Background())
		}
		f.mu.Lock()
		f.probing = false
		closed := f.closed
		f.mu.Unlock()
		if closed {
			return
		}
		f.up.Store(true)
		f.warn(fmt.Sprintf("shared state at %s is back", f.where))
		f.notify(true)
		return
	}
}

// onResync adds a hook run when Redis is back after an outage.
func (f *Fleet) onResync(h func(ctx context.Context)) {
	f.mu.Lock()
	f.resync = append(f.resync, h)
	f.mu.Unlock()
}

// Close stops the probe and the publisher (events not yet written are
// dropped) and closes the connections.
func (f *Fleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	close(f.done)
	f.wg.Wait()
	f.up.Store(false)
	if err := f.rdb.Close(); err != nil {
		return fmt.Errorf("closing the shared state: %w", err)
	}
	return nil
}
