package store

import (
	"fmt"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// SchemaVersion is the record format this binary writes. A file whose schema
// is newer is refused; an older one is migrated on its first write.
const SchemaVersion = 2

// Session modes.
const (
	ModeReal      = "real"
	ModeSimulated = "simulated"
)

// OutcomeRunning is shown for a call whose end was never recorded (still
// running, or its process died).
const OutcomeRunning retry.Outcome = "running"

// OutcomeInterrupted is a call whose process died before its end was
// recorded: a later recorder found it running with its process gone and
// closed it with what was known (its attempts, the time of the last one).
const OutcomeInterrupted retry.Outcome = "interrupted"

// SessionInfo describes the process that records: one session per Recorder.
type SessionInfo struct {
	Version   string // limitscope's version
	Mode      string // ModeReal or ModeSimulated
	Command   string // "send", "bench", "tui", ...
	NoContent bool   // prompts and answers are not stored
}

// Session is one stored session.
type Session struct {
	ID        uint32    `json:"id"`
	Started   time.Time `json:"started_at"`
	Ended     time.Time `json:"ended_at,omitzero"`
	Version   string    `json:"version"`
	Mode      string    `json:"mode"`
	Command   string    `json:"command,omitempty"`
	PID       int       `json:"pid"`
	NoContent bool      `json:"no_content"`
	// Boot and ProcStart tell the recording process from a later one with
	// the same pid: the system's boot id and the process's start time in
	// clock ticks since boot (Linux; empty elsewhere).
	Boot      string `json:"boot,omitempty"`
	ProcStart uint64 `json:"proc_start,omitempty"`
}

// CallError is the error that ended a call.
type CallError struct {
	Class    stream.Class `json:"class"`
	Provider string       `json:"provider,omitempty"`
	Status   int          `json:"status"`
	Code     string       `json:"code,omitempty"`
	Message  string       `json:"message,omitempty"`
}

// Call is one stored call. List fills the summary; Show fills everything,
// including its attempts and text.
type Call struct {
	ID       uint32          // the short id `history show` takes; unique in the file
	CallID   string          // the engine's call id
	Session  uint32          // the session that recorded it
	Started  time.Time       // the call's first event
	Ended    time.Time       // zero while running
	Outcome  retry.Outcome   // OutcomeRunning until its end is recorded
	Chain    []stream.Target // primary first
	ServedBy *stream.Target
	// Totals.
	Attempts int           // HTTP requests
	Waited   time.Duration // every wait: backoff, server delays and pacing
	TTFT     time.Duration // of the serving attempt
	Classes  []stream.Class
	// Not in summaries.
	Policy        retry.Policy
	MaxTokens     int
	FinishReason  string
	Usage         *stream.Usage
	Err           *CallError
	RetryAt       time.Time
	CooldownUntil time.Time
	CooldownHit   bool
	HasPrompt     bool
	HasText       bool
	// Route and Client mark a call that came through the proxy: the model
	// name the request asked for (an alias or provider/model) and the
	// caller's User-Agent, scrubbed of key-shaped text and capped at
	// MaxOriginLen bytes. Empty for a call typed into limitscope, and in
	// summaries unless the Filter asks for them.
	Route  string
	Client string
	// Mode is the recording session's mode (ModeReal or ModeSimulated);
	// "" for a call recorded before calls carried it (Filter.Mode then
	// looks its session up).
	Mode string
	// Filled by Show only.
	Prompt string
	Text   string
	// TextCut: the caller received more of the answer than Text keeps
	// (the stream client keeps the first 1 MiB of an answer's text).
	TextCut      bool
	AttemptsList []retry.Attempt
	Full         bool // the record was decoded in full
}

// Latency is the call's wall time including its waits (zero while running).
func (c *Call) Latency() time.Duration {
	if c.Ended.IsZero() {
		return 0
	}
	return c.Ended.Sub(c.Started)
}

// Retries is the number of requests after the first.
func (c *Call) Retries() int {
	if c.Attempts <= 1 {
		return 0
	}
	return c.Attempts - 1
}

// Primary is the call's first target (zero when none was recorded).
func (c *Call) Primary() stream.Target {
	if len(c.Chain) == 0 {
		return stream.Target{}
	}
	return c.Chain[0]
}

// Classes are stored as a bit mask so list filters need no attempt.
var classBits = []stream.Class{
	stream.ClassOK, stream.ClassQuota, stream.ClassCaller, stream.ClassRateLimit,
	stream.ClassOverload, stream.ClassServer, stream.ClassConnection,
	stream.ClassTimeout, stream.ClassCancelled, stream.ClassFlexCapacity,
}

const classOther = 1 << 15

// The class mask's word also carries the session's mode (added within
// schema 2; older readers ignore these bits): mfKnown says the mode was
// recorded, mfSimulated which one.
const (
	mfSimulated = 1 << 16
	mfKnown     = 1 << 17
)

func modeBits(mode string) uint64 {
	switch mode {
	case ModeSimulated:
		return mfKnown | mfSimulated
	case ModeReal:
		return mfKnown
	}
	return 0
}

func modeFromBits(m uint64) string {
	switch {
	case m&mfKnown == 0:
		return ""
	case m&mfSimulated != 0:
		return ModeSimulated
	}
	return ModeReal
}

func classBit(c stream.Class) uint64 {
	for i, k := range classBits {
		if k == c {
			return 1 << i
		}
	}
	return classOther
}

func classesFromMask(m uint64) []stream.Class {
	var out []stream.Class
	for i, k := range classBits {
		if m&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	if m&classOther != 0 {
		out = append(out, "other")
	}
	return out
}

func classMask(cs []stream.Class) uint64 {
	var m uint64
	for _, c := range cs {
		m |= classBit(c)
	}
	return m
}

var outcomes = []retry.Outcome{
	OutcomeRunning, retry.OutcomeOK, retry.OutcomeStopped, retry.OutcomeDeferred,
	retry.OutcomeGaveUp, retry.OutcomeFailed, retry.OutcomeCancelled,
}

func outcomeByte(o retry.Outcome) byte {
	for i, k := range outcomes {
		if k == o {
			return byte(i)
		}
	}
	return 255
}

// Small vocabularies are written as one byte: the index in their table
// (0 is ""), or 255 and the string for a value the table lacks.
var (
	classTable    = []string{"", "ok", "quota", "caller", "rate_limit", "overload", "server", "connection", "timeout", "cancelled"}
	decisionTable = []string{"", "done", "retry", "fail over", "stop", "fail", "defer", "give up", "cancel"}
	sourceTable   = []string{"", "retry-after-ms", "retry-after", "retry-info", "message", "reset", "backoff"}
)

func (e *enc) enum(s string, table []string) {
	for i, k := range table {
		if k == s {
			e.byte(byte(i))
			return
		}
	}
	e.byte(255)
	e.str(s)
}

func (d *dec) enum(table []string) string {
	b := d.byte()
	if int(b) < len(table) {
		return table[b]
	}
	if b == 255 {
		return d.str()
	}
	d.fail()
	return ""
}

// target writes t as its index in chain, or 255 and the target itself.
func (e *enc) target(t stream.Target, chain []stream.Target) {
	for i, c := range chain {
		if c == t && i < 255 {
			e.byte(byte(i))
			return
		}
	}
	e.byte(255)
	e.str(t.EndpointKey())
	e.str(storedModel(t))
}

func (d *dec) target(chain []stream.Target) stream.Target {
	b := d.byte()
	if b == 255 {
		return d.provModel()
	}
	if int(b) < len(chain) {
		return chain[b]
	}
	if chain == nil && d.err == nil { // read without its call (repair)
		return stream.Target{}
	}
	d.fail()
	return stream.Target{}
}

// servedBy writes the serving target as the chain entry of the same
// provider plus its model when the provider reported another one.
func (e *enc) servedBy(t stream.Target, chain []stream.Target) {
	for i, c := range chain {
		if c == t && i < 255 { // the entry itself (another of its tiers may come first)
			e.byte(byte(i))
			e.byte(0)
			return
		}
	}
	for i, c := range chain {
		if c.Provider == t.Provider && c.Account == t.Account && c.Tier == t.Tier && i < 255 {
			e.byte(byte(i))
			if c.Model == t.Model {
				e.byte(0)
			} else {
				e.byte(1)
				e.str(t.Model)
			}
			return
		}
	}
	e.byte(255)
	e.str(t.EndpointKey())
	e.str(storedModel(t))
}

func (d *dec) servedBy(chain []stream.Target) stream.Target {
	b := d.byte()
	if b == 255 || int(b) >= len(chain) {
		if b != 255 {
			d.fail()
		}
		return d.provModel()
	}
	t := chain[b]
	if d.byte() == 1 {
		t.Model = d.str()
	}
	return t
}

// Policies are mostly the default: a kind byte says which.
const (
	policyZero    = 0
	policyDefault = 1
	policyOwn     = 2
)

// call flags
const (
	cfEnded = 1 << iota
	cfServed
	cfUsage
	cfErr
	cfCooldownHit
	cfPrompt
	cfText
	// cfOrigin: the route and client follow the record's last field. They
	// were added within schema 2: a record without the flag (every record
	// written before) simply has none, and a reader that predates them
	// ignores the flag and the trailing bytes.
	cfOrigin
)

// encodeCall writes a call record (schema 2). The summary fields come first
// so list and stats stop decoding early. Started is the key's time.
func encodeCall(c *Call) []byte {
	var e enc
	encodeCallInto(&e, c)
	return e.b
}

// encodeCallInto appends the record to e.
func encodeCallInto(e *enc, c *Call) {
	e.byte(SchemaVersion)
	var f byte
	if !c.Ended.IsZero() {
		f |= cfEnded
	}
	if c.ServedBy != nil {
		f |= cfServed
	}
	if c.Usage != nil {
		f |= cfUsage
	}
	if c.Err != nil {
		f |= cfErr
	}
	if c.CooldownHit {
		f |= cfCooldownHit
	}
	if c.HasPrompt {
		f |= cfPrompt
	}
	if c.HasText {
		f |= cfText
	}
	if c.Route != "" || c.Client != "" {
		f |= cfOrigin
	}
	e.byte(f)
	e.uvarint(uint64(c.Session))
	ob := outcomeByte(c.Outcome)
	e.byte(ob)
	if ob == 255 {
		e.str(string(c.Outcome))
	}
	if f&cfEnded != 0 {
		e.varint(int64(c.Ended.Sub(c.Started)))
	}
	e.uvarint(uint64(len(c.Chain)))
	for _, t := range c.Chain {
		e.str(t.EndpointKey())
		e.str(storedModel(t))
	}
	if c.ServedBy != nil {
		e.servedBy(*c.ServedBy, c.Chain)
	}
	e.uvarint(uint64(c.Attempts))
	e.dur(c.Waited)
	e.dur(c.TTFT)
	e.uvarint(classMask(c.Classes) | modeBits(c.Mode))
	// End of the summary.
	e.str(c.CallID)
	e.str(c.FinishReason)
	if c.Usage != nil {
		e.uvarint(uint64(c.Usage.InputTokens))
		e.uvarint(uint64(c.Usage.OutputTokens))
	}
	if c.Err != nil {
		e.enum(string(c.Err.Class), classTable)
		e.str(c.Err.Provider)
		e.uvarint(uint64(c.Err.Status))
		e.str(c.Err.Code)
		e.str(redact(c.Err.Message))
	}
	e.timeRel(c.RetryAt, c.Started)
	e.timeRel(c.CooldownUntil, c.Started)
	p := c.Policy
	switch p {
	case retry.Policy{}:
		e.byte(policyZero)
	case retry.DefaultPolicy():
		e.byte(policyDefault)
	default:
		e.byte(policyOwn)
		encodePolicy(e, &p)
	}
	e.varint(int64(c.MaxTokens))
	if f&cfOrigin != 0 {
		e.str(c.Route)
		e.str(c.Client)
	}
}

func encodePolicy(e *enc, p *retry.Policy) {
	e.varint(int64(p.MaxAttempts))
	e.varint(int64(p.TriesPerTarget))
	e.dur(p.FailoverWait)
	e.dur(p.MaxWait)
	e.dur(p.Deadline)
	e.dur(p.BackoffBase)
	e.dur(p.BackoffCap)
	e.dur(p.Jitter)
	e.bool(p.IgnoreCooldown)
}

// decodeCall reads a call record; with summary it stops after the fields list
// and stats use. key gives the start time and the id.
func decodeCall(key, v []byte, summary bool) (*Call, error) {
	c, _, err := decodeCallRest(key, v, summary)
	return c, err
}

// decodeCallRest also returns how many bytes were left over (repair's
// salvage uses it to tell record kinds apart).
func decodeCallRest(key, v []byte, summary bool) (*Call, int, error) {
	return decodeCallInto(nil, key, v, summary)
}

// decodeCallInto is decodeCallRest into dst, whose earlier contents are
// dropped, or into a new Call when dst is nil.
func decodeCallInto(dst *Call, key, v []byte, summary bool) (*Call, int, error) {
	if len(v) == 0 {
		return nil, 0, fmt.Errorf("call %x: empty record", key)
	}
	switch v[0] {
	case SchemaVersion:
	case 1:
		c, err := decodeCallV1(key, v)
		if dst != nil && c != nil {
			*dst, c = *c, dst
		}
		return c, 0, err
	default:
		return nil, 0, newerRecordError(v[0])
	}
	c := dst
	if c == nil {
		c = &Call{}
	}
	*c = Call{ID: keySeq(key), Started: keyTime(key)}
	d := dec{b: v[1:]}
	f := d.byte()
	c.Session = uint32(d.uvarint())
	ob := d.byte()
	if int(ob) < len(outcomes) {
		c.Outcome = outcomes[ob]
	} else {
		c.Outcome = retry.Outcome(d.str())
	}
	if f&cfEnded != 0 {
		c.Ended = c.Started.Add(d.dur())
	}
	if n := d.uvarint(); n > 0 && n <= uint64(len(d.b)) {
		c.Chain = make([]stream.Target, n)
		for i := range c.Chain {
			c.Chain[i] = d.provModel()
		}
	} else if n > 0 {
		d.fail()
	}
	if f&cfServed != 0 {
		sb := d.servedBy(c.Chain)
		c.ServedBy = &sb
	}
	c.Attempts = int(d.uvarint())
	c.Waited = d.dur()
	c.TTFT = d.dur()
	m := d.uvarint()
	c.Classes = classesFromMask(m)
	c.Mode = modeFromBits(m)
	c.CooldownHit = f&cfCooldownHit != 0
	c.HasPrompt = f&cfPrompt != 0
	c.HasText = f&cfText != 0
	if summary {
		if d.err != nil {
			return nil, 0, fmt.Errorf("call %d: %w", c.ID, d.err)
		}
		return c, len(d.b), nil
	}
	c.Full = true
	c.CallID = d.str()
	c.FinishReason = d.str()
	if f&cfUsage != 0 {
		c.Usage = &stream.Usage{InputTokens: int(d.uvarint()), OutputTokens: int(d.uvarint())}
	}
	if f&cfErr != 0 {
		c.Err = &CallError{Class: stream.Class(d.enum(classTable)), Provider: d.str(), Status: int(d.uvarint()), Code: d.str(), Message: d.str()}
	}
	c.RetryAt = d.timeRel(c.Started)
	c.CooldownUntil = d.timeRel(c.Started)
	switch d.byte() {
	case policyZero:
	case policyDefault:
		c.Policy = retry.DefaultPolicy()
	case policyOwn:
		c.Policy.MaxAttempts = d.int()
		c.Policy.TriesPerTarget = d.int()
		c.Policy.FailoverWait = d.dur()
		c.Policy.MaxWait = d.dur()
		c.Policy.Deadline = d.dur()
		c.Policy.BackoffBase = d.dur()
		c.Policy.BackoffCap = d.dur()
		c.Policy.Jitter = d.dur()
		c.Policy.IgnoreCooldown = d.bool()
	default:
		d.fail()
	}
	c.MaxTokens = d.int()
	if f&cfOrigin != 0 {
		c.Route = d.str()
		c.Client = d.str()
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("call %d: %w", c.ID, d.err)
	}
	return c, len(d.b), nil
}

// callSummaryStats is what stats needs of a call, read without allocating.
type callStat struct {
	provider []byte // primary target's provider; valid until the tx ends
	served   []byte // the serving target's provider (nil: none); as provider
	outcome  retry.Outcome
	attempts int
	latency  time.Duration
	classes  uint64 // with the mode bits
	started  time.Time
	session  uint32
}

func decodeCallStat(key, v []byte, s *callStat) error {
	if len(v) == 0 {
		return fmt.Errorf("call %x: empty record", key)
	}
	if v[0] != SchemaVersion {
		c, err := decodeCall(key, v, true)
		if err != nil {
			return err
		}
		s.provider = []byte(c.Primary().Provider)
		s.served = nil
		if c.ServedBy != nil {
			s.served = []byte(c.ServedBy.EndpointKey())
		}
		s.outcome = c.Outcome
		s.attempts = c.Attempts
		s.latency = c.Latency()
		s.classes = classMask(c.Classes) | modeBits(c.Mode)
		s.started = c.Started
		s.session = c.Session
		return nil
	}
	d := dec{b: v[1:]}
	f := d.byte()
	s.session = uint32(d.uvarint())
	ob := d.byte()
	if int(ob) < len(outcomes) {
		s.outcome = outcomes[ob]
	} else {
		s.outcome = retry.Outcome(d.rawStr())
	}
	s.latency = 0
	if f&cfEnded != 0 {
		s.latency = d.dur()
	}
	n := d.uvarint()
	s.provider, s.served = nil, nil
	var chain [8][]byte // the chain's providers, for the served index
	for i := uint64(0); i < n && d.err == nil; i++ {
		p := d.rawStr()
		d.skipStr()
		if i == 0 {
			s.provider = p
		}
		if i < uint64(len(chain)) {
			chain[i] = p
		}
	}
	if f&cfServed != 0 {
		if b := d.byte(); b == 255 {
			s.served = d.rawStr()
			d.skipStr()
		} else {
			if int(b) < len(chain) && uint64(b) < n {
				s.served = chain[b]
			}
			if d.byte() == 1 {
				d.skipStr()
			}
		}
	}
	s.attempts = int(d.uvarint())
	d.dur()
	d.dur()
	s.classes = d.uvarint()
	return d.err
}

// attempt flags
const (
	afRetryAfter = 1 << iota
	afMidStream
	afNoRetry
	afLimits
	afByUser // the user failed over (Control.FailOver); the planned wait follows the limits
	afText   // the time to first visible text, the thinking flag and the reasoning tokens follow
	afTier   // the served service tier follows
	// afMore: a second flags byte follows the record's last field, its
	// own fields after it. Added within schema 2: a record without the
	// flag (every record written before) has none, and a reader that
	// predates it ignores the flag and the trailing bytes.
	afMore
)

// second attempt flags (after afMore)
const (
	af2Priority = 1 << iota // the priority tier's token windows follow (encodePriority)
)

// encodeAttempt writes an attempt record (schema 2) without its partial text,
// which lives in the text bucket. callStart is the call key's time.
func encodeAttempt(a *retry.Attempt, callStart time.Time, chain []stream.Target) []byte {
	var e enc
	encodeAttemptInto(&e, a, callStart, chain)
	return e.b
}

// encodeAttemptInto appends the record to e.
func encodeAttemptInto(e *enc, a *retry.Attempt, callStart time.Time, chain []stream.Target) {
	e.byte(SchemaVersion)
	var f byte
	if a.RetryAfter != nil {
		f |= afRetryAfter
	}
	if a.MidStream {
		f |= afMidStream
	}
	if a.NoRetry {
		f |= afNoRetry
	}
	if a.Limits != nil {
		f |= afLimits
	}
	if a.FailedOverByUser {
		f |= afByUser
	}
	if a.TTFText > 0 || a.Thinking || a.ReasoningTokens > 0 {
		f |= afText
	}
	if a.ServedTier != "" {
		f |= afTier
	}
	var f2 byte
	if a.Limits != nil && (a.Limits.PriorityInputTokens != nil || a.Limits.PriorityOutputTokens != nil) {
		f2 |= af2Priority
	}
	if f2 != 0 {
		f |= afMore
	}
	e.byte(f)
	e.uvarint(uint64(a.N))
	e.target(a.Target, chain)
	e.uvarint(uint64(a.Status))
	e.enum(string(a.Class), classTable)
	e.str(a.Code)
	e.str(a.QuotaID)
	e.str(redact(a.Message))
	if a.RetryAfter != nil {
		e.dur(*a.RetryAfter)
	}
	e.enum(string(a.DelaySource), sourceTable)
	e.dur(a.Paced)
	e.dur(a.Waited)
	e.str(a.RequestID)
	e.dur(a.TTFT)
	e.timeRel(a.StartedAt, callStart)
	e.dur(a.Duration)
	e.enum(string(a.Decision), decisionTable)
	if a.Limits != nil {
		encodeLimits(e, a.Limits, a.StartedAt)
	}
	if a.FailedOverByUser {
		e.dur(a.WaitPlanned)
	}
	if f&afText != 0 {
		e.dur(a.TTFText)
		e.bool(a.Thinking)
		e.uvarint(uint64(a.ReasoningTokens))
	}
	if f&afTier != 0 {
		e.str(a.ServedTier)
	}
	if f&afMore != 0 {
		e.byte(f2)
		if f2&af2Priority != 0 {
			encodeWindows(e, []*stream.Window{a.Limits.PriorityInputTokens, a.Limits.PriorityOutputTokens}, a.Limits.At)
		}
	}
}

// decodeAttempt reads an attempt of the call that started at callStart with
// chain (nil when unknown: the target then reads as zero unless stored).
func decodeAttempt(key, v []byte, callStart time.Time, chain []stream.Target) (retry.Attempt, error) {
	a, _, err := decodeAttemptRest(key, v, callStart, chain)
	return a, err
}

func decodeAttemptRest(key, v []byte, callStart time.Time, chain []stream.Target) (retry.Attempt, int, error) {
	var a retry.Attempt
	if len(v) == 0 {
		return a, 0, fmt.Errorf("attempt %x: empty record", key)
	}
	switch v[0] {
	case SchemaVersion:
	case 1:
		a, err := decodeAttemptV1(v)
		return a, 0, err
	default:
		return a, 0, newerRecordError(v[0])
	}
	d := dec{b: v[1:]}
	f := d.byte()
	a.N = int(d.uvarint())
	a.Target = d.target(chain)
	a.Status = int(d.uvarint())
	a.Class = stream.Class(d.enum(classTable))
	a.Code = d.str()
	a.QuotaID = d.str()
	a.Message = d.str()
	if f&afRetryAfter != 0 {
		ra := d.dur()
		a.RetryAfter = &ra
	}
	a.DelaySource = stream.DelaySource(d.enum(sourceTable))
	a.Paced = d.dur()
	a.Waited = d.dur()
	a.RequestID = d.str()
	a.TTFT = d.dur()
	a.StartedAt = d.timeRel(callStart)
	a.Duration = d.dur()
	a.Decision = retry.Decision(d.enum(decisionTable))
	a.MidStream = f&afMidStream != 0
	a.NoRetry = f&afNoRetry != 0
	if f&afLimits != 0 {
		a.Limits = decodeLimits(&d, a.StartedAt)
	}
	if f&afByUser != 0 {
		a.FailedOverByUser = true
		a.WaitPlanned = d.dur()
	}
	if f&afText != 0 {
		a.TTFText = d.dur()
		a.Thinking = d.bool()
		a.ReasoningTokens = int(d.uvarint())
	}
	if f&afTier != 0 {
		a.ServedTier = d.str()
		a.Downgraded = a.Target.Downgraded(a.ServedTier)
	}
	if f&afMore != 0 {
		f2 := d.byte()
		if f2&af2Priority != 0 {
			// Only with the limits they belong to; a damaged record
			// without them still reads its windows past.
			l := a.Limits
			if l == nil {
				l = &stream.Limits{At: a.StartedAt}
			}
			decodeWindows(&d, []**stream.Window{&l.PriorityInputTokens, &l.PriorityOutputTokens}, l.At)
		}
	}
	if d.err != nil {
		return a, 0, fmt.Errorf("attempt %x: %w", key, d.err)
	}
	return a, len(d.b), nil
}

// window flags
const (
	wfLimit = 1 << iota
	wfRemaining
	wfPerDay
	wfRounded
	wfReset
)

func encodeLimits(e *enc, l *stream.Limits, base time.Time) {
	e.timeRel(l.At, base)
	encodeWindows(e, []*stream.Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens}, l.At)
}

// encodeWindows writes up to 8 windows: a byte saying which are there,
// then each one's flags, limit, remaining and reset (relative to at).
func encodeWindows(e *enc, ws []*stream.Window, at time.Time) {
	var m byte
	for i, w := range ws {
		if w != nil {
			m |= 1 << i
		}
	}
	e.byte(m)
	for _, w := range ws {
		if w == nil {
			continue
		}
		var f byte
		if w.HasLimit {
			f |= wfLimit
		}
		if w.HasRemaining {
			f |= wfRemaining
		}
		if w.PerDay {
			f |= wfPerDay
		}
		if w.Rounded {
			f |= wfRounded
		}
		if !w.Reset.IsZero() {
			f |= wfReset
		}
		e.byte(f)
		e.varint(w.Limit)
		e.varint(w.Remaining)
		if f&wfReset != 0 {
			e.varint(int64(w.Reset.Sub(at)))
		}
	}
}

func decodeLimits(d *dec, base time.Time) *stream.Limits {
	l := &stream.Limits{At: d.timeRel(base)}
	decodeWindows(d, []**stream.Window{&l.Requests, &l.Tokens, &l.InputTokens, &l.OutputTokens}, l.At)
	return l
}

// decodeWindows reads what encodeWindows wrote into ws.
func decodeWindows(d *dec, ws []**stream.Window, at time.Time) {
	m := d.byte()
	for i, p := range ws {
		if m&(1<<i) == 0 {
			continue
		}
		f := d.byte()
		w := &stream.Window{
			Limit: d.varint(), Remaining: d.varint(),
			HasLimit: f&wfLimit != 0, HasRemaining: f&wfRemaining != 0,
			PerDay: f&wfPerDay != 0, Rounded: f&wfRounded != 0,
		}
		if f&wfReset != 0 {
			w.Reset = at.Add(d.dur())
		}
		*p = w
	}
}

func encodeSession(s *Session) []byte {
	e := enc{}
	e.byte(SchemaVersion)
	e.bool(s.NoContent)
	e.timeAbs(s.Ended)
	e.str(s.Version)
	e.str(s.Mode)
	e.str(s.Command)
	e.uvarint(uint64(s.PID))
	// Added within schema 2: older readers ignore trailing bytes.
	if s.Boot != "" || s.ProcStart != 0 {
		e.str(s.Boot)
		e.uvarint(s.ProcStart)
	}
	return e.b
}

func decodeSession(key, v []byte) (*Session, error) {
	s, _, err := decodeSessionRest(key, v)
	return s, err
}

func decodeSessionRest(key, v []byte) (*Session, int, error) {
	if len(v) == 0 {
		return nil, 0, fmt.Errorf("session %x: empty record", key)
	}
	switch v[0] {
	case SchemaVersion:
	case 1:
		s, err := decodeSessionV1(key, v)
		return s, 0, err
	default:
		return nil, 0, newerRecordError(v[0])
	}
	s := &Session{ID: keySeq(key), Started: keyTime(key)}
	d := dec{b: v[1:]}
	s.NoContent = d.bool()
	s.Ended = d.timeAbs()
	s.Version = d.str()
	s.Mode = d.str()
	s.Command = d.str()
	s.PID = int(d.uvarint())
	if len(d.b) > 0 && d.err == nil {
		s.Boot = d.str()
		s.ProcStart = d.uvarint()
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("session %d: %w", s.ID, d.err)
	}
	return s, len(d.b), nil
}
