package stream

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The class table: what each provider's status and code mean, for the retry
// policy, which decides on classes alone. classify checks these rows in
// order and the first that matches wins. Why each row is where it is:
//
//	quota (a person must act; ScopeAccount unless noted)
//	  - code or type insufficient_quota, credit_balance_exhausted,
//	    organization/project_spend_limit_exceeded, organization_usage_limit_exceeded,
//	    billing_hard_limit_reached (OpenAI-style billing stops, whatever the
//	    status: OpenAI sends insufficient_quota as a 429 that looks retryable)
//	  - Anthropic details.error_code enforced_spend_limit_reached (tier spend
//	    cap; resets 00:00 UTC on the 1st)
//	  - 400 or 429 "You have reached your (specified) (workspace) API usage
//	    limits" (Anthropic's usage limits) and 400 "credit balance is too
//	    low" (Anthropic's credit stop, sent as an invalid request)
//	  - 402 (payment required: DeepSeek, Mistral billing)
//	  - a Gemini QuotaFailure quotaId containing PerDay (ScopeTarget: the
//	    model's daily quota; resets at the dialect's daily reset)
//	  - a message naming tokens/requests per day, (TPD) or (RPD), on a 429,
//	    413 or inside a stream (Groq's per-day windows; ScopeTarget)
//	  - "used all available credits" / "reached its monthly spending limit"
//	    (xAI's credit and spend stops, sent as 403/429)
//	caller, model-specific (another model may take it)
//	  - code context_length_exceeded; a 429/413 "Request too large" (a
//	    request over the model's per-minute token limit can never pass on
//	    it); a 400 whose message says the context is too long; on Gemini a
//	    500 saying so (it reports an over-long input that way)
//	caller (fix the request): 400, 401, 403, 404, 413, 422; on Gemini
//	  DEADLINE_EXCEEDED (the request cannot finish within its deadline)
//	rate_limit: any other 429 (the account's per-minute budget; transient)
//	overload: 503, 529 (Anthropic), 498
//	flex_capacity (decided after the table, by the provider's Tiers
//	  columns, see flexCapacity): the provider's flex status (OpenAI 429
//	  without a rate-limit code or message, Gemini 503) to a request at a
//	  flex tier, and Groq's 498 capacity_exceeded whatever was asked
//	server: 500, 502, 504, 408, 409, and any other status
//	caller: any other 4xx
//
// The rest are decided by the client, not by a body: connection (no
// response, a reset, a stream cut before its end signal), timeout (header,
// first-token, stall, no-progress), cancelled (the caller's context ended),
// server (a 200 that is not the expected stream, or one too large: then
// Error.Oversize is set too, and the same target is not retried).
//
// An error inside a 200 stream is classified by the status its body implies
// (ErrorBody.impliedStatus: its numeric code, else its type, code or status
// name), through the same rows.

var quotaCodes = map[string]bool{
	"insufficient_quota":                true,
	"credit_balance_exhausted":          true,
	"organization_spend_limit_exceeded": true,
	"project_spend_limit_exceeded":      true,
	"organization_usage_limit_exceeded": true,
	"billing_hard_limit_reached":        true,
}

var (
	contextTooLongRE = regexp.MustCompile(`(?i)(input context is too long|context (?:is )?too long|prompt is too long|exceeds the maximum number of tokens|maximum context length|context window)`)
	regainRE         = regexp.MustCompile(`(?i)regain access on (\d{4}-\d{2}-\d{2})(?: at (\d{1,2}):(\d{2}))? UTC`)
	perDayMsgRE      = regexp.MustCompile(`(?i)(?:tokens|requests) per day|\((?:TPD|RPD)\)`)
)

// verdict is what the classes table says about one error.
type verdict struct {
	class         Class
	modelSpecific bool
	scope         Scope
	perDay        bool // a per-day quota (its reset is the day's)
	spendCap      bool // Anthropic's tier spend cap (resets on the 1st)
}

// classify applies the class table (see the file comment; the first
// matching row wins) to an error of the given HTTP status (for an error
// inside a 200 stream, the status its body implies; 0 when unknown), with
// the rows of dialect d.
func classify(d *dialectSpec, status int, b ErrorBody) verdict {
	if d.classRows != nil {
		if v, ok := d.classRows(d, status, b); ok {
			return v
		}
	}
	code, typ := strings.ToLower(b.Code), strings.ToLower(b.Type)
	msg := b.Message

	// quota: a person must act.
	switch {
	case quotaCodes[code] || quotaCodes[typ]:
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case b.DetailCode == "enforced_spend_limit_reached":
		return verdict{class: ClassQuota, scope: ScopeAccount, spendCap: true}
	case (status == 400 || status == 429) &&
		(strings.HasPrefix(msg, "You have reached your specified API usage limits") ||
			strings.HasPrefix(msg, "You have reached your specified workspace API usage limits") ||
			strings.HasPrefix(msg, "You have reached your API usage limits")):
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case status == 400 && strings.Contains(strings.ToLower(msg), "credit balance is too low"):
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case status == 402:
		return verdict{class: ClassQuota, scope: ScopeAccount}
	}
	for _, id := range b.QuotaIDs {
		if strings.Contains(id, "PerDay") {
			return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}
		}
	}
	if perDayMsgRE.MatchString(msg) && (status == 429 || status == 413 || status == 0) {
		return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}
	}
	if lm := strings.ToLower(msg); strings.Contains(lm, "used all available credits") ||
		strings.Contains(lm, "reached its monthly spending limit") {
		return verdict{class: ClassQuota, scope: ScopeAccount}
	}

	// caller, model-specific: another model may take it.
	switch {
	case code == "context_length_exceeded" || typ == "context_length_exceeded":
		return verdict{class: ClassCaller, modelSpecific: true}
	case (status == 429 || status == 413) && strings.HasPrefix(strings.TrimSpace(msg), "Request too large"):
		return verdict{class: ClassCaller, modelSpecific: true}
	case status == 400 && contextTooLongRE.MatchString(msg):
		return verdict{class: ClassCaller, modelSpecific: true}
	case status == 500 && d.contextTooLongOn500 && contextTooLongRE.MatchString(msg):
		return verdict{class: ClassCaller, modelSpecific: true}
	}

	// caller: fix the request.
	switch status {
	case 400, 401, 403, 404, 413, 422:
		return verdict{class: ClassCaller}
	}
	if d.deadlineIsCaller && (status == 504 || status == 0) && strings.EqualFold(b.Status, "DEADLINE_EXCEEDED") {
		return verdict{class: ClassCaller}
	}

	switch {
	case status == 429:
		return verdict{class: ClassRateLimit}
	case status == 503 || status == 529 || status == 498:
		return verdict{class: ClassOverload}
	case status == 500 || status == 502 || status == 504 || status == 408 || status == 409:
		return verdict{class: ClassServer}
	case status >= 400 && status < 500:
		return verdict{class: ClassCaller}
	}
	return verdict{class: ClassServer}
}

// quotaReset says when a quota stop ends, when the provider said so: the
// message's "You will regain access on 2026-09-01 at 00:00 UTC"; Anthropic's
// tier spend cap at 00:00 UTC on the 1st of next month; a per-day quota at
// the dialect's daily reset (Gemini: the next midnight in
// America/Los_Angeles), else after the server's delay. Zero when unknown.
func quotaReset(v verdict, d *dialectSpec, b ErrorBody, delay time.Duration, now time.Time) time.Time {
	if m := regainRE.FindStringSubmatch(b.Message); m != nil {
		if t, err := time.Parse("2006-01-02", m[1]); err == nil {
			if m[2] != "" {
				h, _ := strconv.Atoi(m[2])
				mi, _ := strconv.Atoi(m[3])
				if h < 24 && mi < 60 {
					t = t.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute)
				}
			}
			return t
		}
	}
	switch {
	case v.spendCap:
		return FirstOfNextMonthUTC(now)
	case v.perDay && d.dailyReset != nil:
		return d.dailyReset(now)
	case v.perDay && delay > 0:
		return now.Add(delay)
	}
	return time.Time{}
}

// FirstOfNextMonthUTC returns 00:00 UTC on the first day of the month after
// now's (Anthropic's tier spend cap resets then).
func FirstOfNextMonthUTC(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}
