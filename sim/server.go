package sim

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // Gemini's per-day quotas reset at midnight Pacific, wherever this runs
)

// Clock is time as the simulator sees it: token buckets, windows, per-day
// resets, budgets and timed fault windows all run on it. Streaming pace and
// hangs use real timers.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Options configure a simulator.
type Options struct {
	Scenario string // default "calm"; a preset name, or the name of the scenario in ScenarioFile
	// Seed seeds the ids, the answers' text and the scenario's fault draws:
	// a fixed seed reproduces a run exactly. 0 picks a random seed for this
	// simulator (Server.Seed tells which), so two simulators never repeat
	// an id.
	Seed  int64
	Clock Clock // nil: the wall clock
	// TokensPerSecond is the streaming pace; 0 takes each provider's pace
	// from the scenario. Tests set it very high.
	TokensPerSecond float64
	// FirstTokenDelay is the wait before the first text. When
	// TokensPerSecond is 0 (realistic pacing) a zero FirstTokenDelay takes
	// the scenario's per-provider delay; when TokensPerSecond is set, it is
	// taken literally (tests set 0: no delay).
	FirstTokenDelay time.Duration
	// ScenarioFile is a scenario file to load (see README.md). Its scenario
	// becomes selectable by its name and is the default when Scenario is "".
	ScenarioFile string
	// HangLimit bounds a "hang" fault (default 10 minutes, as DeepSeek closes
	// a request that has not started after 10 minutes).
	HangLimit time.Duration
	// AnyModel accepts every model name; otherwise a model outside the
	// provider's catalogue (built in, or added by the scenario file's
	// models lines) gets the provider's not-found answer.
	AnyModel bool
	// Answer shapes the answers' text (see README.md: length and shape, e.g.
	// "words", "paragraph:1MB", "paragraphs", "code"); "" takes the default.
	Answer string
}

// Server is the simulated providers as one http.Handler: each provider under
// /{provider}/ with its real paths, and the admin endpoint under /_sim/. It
// is safe for concurrent use.
type Server struct {
	opts   Options
	clock  Clock
	loc    *time.Location // Gemini's per-day reset zone
	file   *scenario      // from Options.ScenarioFile, or nil
	closed chan struct{}
	once   sync.Once

	instance string // this simulator's random id, on every response
	answer   answerShape

	mu      sync.Mutex
	scen    *scenario
	started time.Time
	state   map[string]*provState
	// accounts are the named accounts' states (AccountKey), by
	// "provider@account", made on first use.
	accounts map[string]*provState
	armed    []*armedFault // injected faults and the holds faults left behind, oldest first
	nextArm  int
	seed     uint64
	rng      *rand.Rand // fault draws; under mu
	seq      uint64     // ids derive from seed and seq
}

// provState is one provider's live limits and counters.
type provState struct {
	cfg                            *providerConfig
	rpm, tpm, itpm, otpm, rpd, tpd limiter // nil: unlimited
	pitpm, potpm                   limiter // the priority tier's token windows (Anthropic); nil: no priority capacity
	spent                          float64
	spendKey                       int64
	recent                         []time.Time // request times in the last minute (acceleration limit)
	requests, errors               int64
	degradedUntil                  time.Time
	degradeID                      int                   // the Arm id of the degradation
	phase                          map[int]time.Duration // seeded window offsets (phase=random rules), by rule index
	traceNext                      int                   // trace mode: the next recorded outcome
}

// New builds a simulator. An unknown scenario or a bad scenario file is an
// error.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, clock: opts.Clock, closed: make(chan struct{})}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	if s.opts.HangLimit <= 0 {
		s.opts.HangLimit = 10 * time.Minute
	}
	if s.opts.TokensPerSecond < 0 || math.IsNaN(s.opts.TokensPerSecond) {
		return nil, fmt.Errorf("sim: tokens per second %v is negative", s.opts.TokensPerSecond)
	}
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		loc = time.FixedZone("PST", -8*3600)
	}
	s.loc = loc
	shape, err := parseAnswer(opts.Answer)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s.answer = shape
	s.instance = randomID()
	seed := opts.Seed
	for seed == 0 {
		seed = int64(randomUint64() >> 1)
	}
	s.setSeed(seed)
	if opts.ScenarioFile != "" {
		f, err := loadScenarioFile(opts.ScenarioFile)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.file = f
	}
	name := opts.Scenario
	if name == "" {
		name = "calm"
		if s.file != nil {
			name = s.file.Name
		}
	}
	if err := s.SetScenario(name); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases every hung or stalled request. The server still answers
// afterwards; Close is for shutting down.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
}

// Scenario returns the name of the scenario in effect.
func (s *Server) Scenario() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scen.Name
}

// SetScenario switches to the named scenario: its limits start afresh (full
// buckets, empty windows, nothing spent) and its timed windows count from
// now. Pending injected faults are kept.
func (s *Server) SetScenario(name string) error {
	var sc *scenario
	if s.file != nil && name == s.file.Name {
		sc = s.file
	} else {
		p, err := preset(name)
		if err != nil {
			if s.file != nil {
				return fmt.Errorf("sim: %w (or %q from %s)", err, s.file.Name, s.opts.ScenarioFile)
			}
			return fmt.Errorf("sim: %w", err)
		}
		sc = p
	}
	now := s.clock.Now()
	s.mu.Lock()
	seed := s.seed
	s.mu.Unlock()
	state := make(map[string]*provState, len(providerNames))
	for _, p := range providerNames {
		state[p] = s.newState(p, sc.Providers[p], seed)
	}
	s.mu.Lock()
	s.scen, s.started, s.state, s.accounts = sc, now, state, nil
	s.mu.Unlock()
	return nil
}

func (s *Server) newState(provider string, c *providerConfig, seed uint64) *provState {
	st := &provState{cfg: c, phase: map[int]time.Duration{}}
	for i, r := range c.Faults {
		if r.PhaseRand && r.Every > 0 {
			st.phase[i] = time.Duration(mix64(seed^seedOf(provider, fmt.Sprint(i))) % uint64(r.Every))
		}
	}
	perMin := func(n, burst int64) limiter {
		if n <= 0 {
			return nil
		}
		if c.LimitKind == "bucket" {
			return newBurstBucket(n, burst, time.Minute)
		}
		return newQuantizedWindow(n, burst, time.Minute)
	}
	perDay := func(n int64) limiter {
		if n <= 0 {
			return nil
		}
		if providerOf(provider).dayAtMidnight {
			return newDaily(n, s.loc)
		}
		// Groq's per-day headers reset like a bucket refilling over a day
		// (its documented example: 30 used of 14400, reset in 2m59.56s).
		return newBucket(n, 24*time.Hour)
	}
	st.rpm = perMin(c.RPM, c.Burst) // the burst is the requests limit's
	st.tpm, st.itpm, st.otpm = perMin(c.TPM, 0), perMin(c.ITPM, 0), perMin(c.OTPM, 0)
	st.rpd, st.tpd = perDay(c.RPD), perDay(c.TPD)
	if providerOf(provider).tiers.priority != "" {
		st.pitpm, st.potpm = perMin(c.PriorityITPM, 0), perMin(c.PriorityOTPM, 0)
	}
	return st
}

// Inject arms a fault (see Arm).
func (s *Server) Inject(f Fault) error {
	_, err := s.Arm(f)
	return err
}

// Seed returns the seed in effect (the random one when Options.Seed was 0).
func (s *Server) Seed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(s.seed)
}

// SetSeed restarts the ids and the fault draws from seed (0: a new random
// seed), so what follows reproduces a run with that seed.
func (s *Server) SetSeed(seed int64) int64 {
	for seed == 0 {
		seed = int64(randomUint64() >> 1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setSeed(seed)
	return seed
}

func (s *Server) setSeed(seed int64) {
	s.seed = uint64(seed)
	s.rng = rand.New(rand.NewPCG(s.seed, 0x5eed))
	s.seq = 0
}

// Instance is this simulator's random id, sent on every response as
// x-limitscope-sim-instance (callers scope simulated stops by it).
func (s *Server) Instance() string { return s.instance }

// nextSeed is the seed of the next id: from the seed and a counter. Called
// with s.mu held.
func (s *Server) nextSeed() uint64 {
	s.seq++
	return mix64(s.seed ^ mix64(s.seq))
}

// mix64 is SplitMix64's finalizer: distinct inputs, unrelated outputs.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// idRand is the random source one id is drawn from.
func idRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x1d)) }

// randomUint64 is a random number from the system's source.
func randomUint64() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// randomID is a simulator instance id: "sim_" and 16 hex digits.
func randomID() string { return fmt.Sprintf("sim_%016x", randomUint64()) }

// The headers every simulator response carries.
const (
	HeaderInstance = "x-limitscope-sim-instance" // the Server's random id
	HeaderSeed     = "x-limitscope-sim-seed"     // the seed in effect, to record and replay a run
)

// ServeHTTP routes /_sim/ to the admin endpoint and /{provider}/... to that
// provider's simulated API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderInstance, s.instance)
	w.Header().Set(HeaderSeed, fmt.Sprint(s.Seed()))
	path := r.URL.Path
	if path == "/_sim" || strings.HasPrefix(path, "/_sim/") {
		s.serveAdmin(w, r)
		return
	}
	rest := strings.TrimPrefix(path, "/")
	provider, sub, _ := strings.Cut(rest, "/")
	sub = "/" + sub
	p := providerOf(provider)
	if p == nil {
		writeReply(w, notFound(path))
		return
	}
	below, ok := strings.CutPrefix(path, p.prefix)
	if !ok {
		below = "/!" + sub // no route matches: the provider's own 404
	}
	s.serveProvider(w, r, p, below)
}

func writeReply(w http.ResponseWriter, rp reply) {
	for k, vs := range rp.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(rp.body)))
	w.WriteHeader(rp.status)
	_, _ = w.Write(rp.body)
}
