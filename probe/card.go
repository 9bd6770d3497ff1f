package probe

import "time"

// Card is a target's limits card: what one probe found. `probe --json`
// prints it; docs/probe-card.schema.json describes it.
type Card struct {
	Target    string    `json:"target"` // provider[@account]/model
	Provider  string    `json:"provider"`
	Account   string    `json:"account,omitempty"`
	Model     string    `json:"model"`
	Simulated bool      `json:"simulated"`
	Scenario  string    `json:"scenario,omitempty"`
	At        time.Time `json:"at"`
	Elapsed   int64     `json:"elapsed_ms"`
	Budget    Budget    `json:"budget"`
	Limits    Limits    `json:"limits"`
	// Estimate is what the answers and 429s say when the provider sends no
	// limit headers; nil otherwise (or when nothing was answered).
	Estimate    *Estimate   `json:"estimate"`
	Concurrency Concurrency `json:"concurrency"`
	Latency     Latency     `json:"latency"`
	FirstStop   *Stop       `json:"first_stop"` // the first 429, overload or quota answer; nil when none
	Answers     []string    `json:"answers"`    // each answer's class, in order
}

// QuotaStopped reports whether a quota or billing stop ended the probe
// before any concurrency was measured: such a card says that the target is
// stopped, nothing of its limits, and is not one to compare.
func (c *Card) QuotaStopped() bool {
	return c.Concurrency.StoppedBy == StopQuota && c.Concurrency.Reached == 0
}

// Budget is the requests the probe could spend and spent.
type Budget struct {
	Requests int `json:"requests"`
	Sent     int `json:"sent"`
}

// Where the limits came from.
const (
	SourceHeaders  = "headers"  // the responses' rate-limit headers: the provider's own numbers
	SourceEstimate = "estimate" // no headers: learnt from the answers and 429s
	SourceNone     = "none"     // no headers and nothing learnt
)

// Limits are the documented limits.
type Limits struct {
	Source  string   `json:"source"`
	Windows []Window `json:"windows"`
}

// Window is one header window.
type Window struct {
	Kind      string `json:"kind"` // requests, tokens, input_tokens, output_tokens
	Per       string `json:"per"`  // minute or day
	Limit     *int64 `json:"limit"`
	Remaining *int64 `json:"remaining"`
	ResetInMs *int64 `json:"reset_in_ms"`
	Rounded   bool   `json:"rounded"`
	Semantics string `json:"semantics"`
}

// Estimate is a limit learnt without headers, said as such.
type Estimate struct {
	Requests    int    `json:"requests"`
	Per         string `json:"per"`          // minute or day
	LowerBound  bool   `json:"lower_bound"`  // at least this many: no 429 came
	FromMessage bool   `json:"from_message"` // the 429's message named the limit
	Basis       string `json:"basis"`        // the sentence that says how it was learnt
}

// Why the concurrency ramp stopped.
const (
	StopRateLimit = "rate_limit"
	StopOverload  = "overload"
	StopQuota     = "quota"
	StopBudget    = "budget"
)

// Concurrency is the ramp's result: Reached parallel requests all answered;
// Tried the level it stopped at.
type Concurrency struct {
	Reached   int    `json:"reached"`
	Tried     int    `json:"tried"`
	StoppedBy string `json:"stopped_by"`
}

// Latency is the answered requests' first-token times and output speeds.
type Latency struct {
	Samples               int     `json:"samples"`
	TTFTMs                *Spread `json:"ttft_ms"`
	OutputTokensPerSecond *Spread `json:"output_tokens_per_second"`
}

// Spread is a minimum, median and maximum.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Stop is the first answer that stopped the ramp.
type Stop struct {
	Class         string `json:"class"`
	Status        int    `json:"status"`
	Code          string `json:"code"`
	Message       string `json:"message"`
	QuotaID       string `json:"quota_id,omitempty"`
	RetryAfterMs  int64  `json:"retry_after_ms,omitempty"`
	AfterRequests int    `json:"after_requests"` // answered requests before it
}
