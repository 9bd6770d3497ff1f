package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// geminiDialect is the Gemini API's generateContent and
// streamGenerateContent.
type geminiDialect struct{}

func geminiBody(code int, status, message string, details []any) []byte {
	e := obj{"code", code, "message", message, "status", status}
	if details != nil {
		e = append(e, "details", details)
	}
	return mustJSON(obj{"error", e})
}

func geminiReply(status int, body []byte) reply {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	return reply{status: status, header: h, body: body}
}

func geminiError(code int, status, message string) reply {
	return geminiReply(code, geminiBody(code, status, message, nil))
}

// geminiPath parses /v1beta/models/{model}:{method} (or /v1/...).
func geminiPath(sub string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(sub, "/v1beta/models/")
	if !found {
		if rest, found = strings.CutPrefix(sub, "/v1/models/"); !found {
			return "", "", false
		}
	}
	model, method, ok = strings.Cut(rest, ":")
	if !ok || model == "" || (method != "streamGenerateContent" && method != "generateContent") {
		return "", "", false
	}
	return model, method, true
}

func (geminiDialect) route(_ *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	m, method, ok := geminiPath(sub)
	if !ok || r.Method != http.MethodPost {
		return geminiError(404, "NOT_FOUND", "Requested entity was not found."), false
	}
	req.model, req.method = m, method
	return reply{}, true
}

// auth takes x-goog-api-key or ?key= (the documented forms).
func (geminiDialect) auth(_ *provider, r *http.Request, _ string) (reply, bool) {
	k := r.Header.Get("x-goog-api-key")
	if k == "" {
		k = r.URL.Query().Get("key")
	}
	switch {
	case validKey(k):
		return reply{}, true
	case k == "":
		return geminiError(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."), false
	}
	return geminiReply(400, geminiBody(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", []any{
		obj{"@type", "type.googleapis.com/google.rpc.ErrorInfo", "reason", "API_KEY_INVALID", "domain", "googleapis.com",
			"metadata", obj{"service", "generativelanguage.googleapis.com"}},
	})), false
}

func (geminiDialect) parse(_ *provider, body []byte, r *http.Request, req *simRequest, _ string) (reply, bool) {
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var in struct {
		Contents          []content `json:"contents"`
		SystemInstruction *content  `json:"systemInstruction"`
		GenerationConfig  *struct {
			MaxOutputTokens *int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return geminiError(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unexpected token."), false
	}
	if len(in.Contents) == 0 {
		return geminiError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified\n"), false
	}
	req.stream = req.method == "streamGenerateContent"
	req.geminiSSE = r.URL.Query().Get("alt") == "sse"
	if g := in.GenerationConfig; g != nil && g.MaxOutputTokens != nil && *g.MaxOutputTokens > 0 {
		req.maxTokens = *g.MaxOutputTokens
	}
	var b strings.Builder
	all := in.Contents
	if in.SystemInstruction != nil {
		all = append([]content{*in.SystemInstruction}, all...)
	}
	for _, c := range all {
		for _, p := range c.Parts {
			b.WriteString(p.Text)
			req.inputTokens += tokensOf(p.Text)
		}
		b.WriteByte('\n')
	}
	if req.inputTokens == 0 {
		req.inputTokens = 1
	}
	req.prompt = b.String()
	return reply{}, true
}

// ---- answers --------------------------------------------------------------

func geminiFinish(f string) string {
	if f == "length" {
		return "MAX_TOKENS"
	}
	return "STOP"
}

func (a *answerPlan) geminiChunk(text string, final bool) obj {
	cand := obj{"content", obj{"parts", []any{obj{"text", text}}, "role", "model"}}
	prompt := []any{obj{"modality", "TEXT", "tokenCount", a.req.inputTokens}}
	usage := obj{"promptTokenCount", a.req.inputTokens, "totalTokenCount", a.req.inputTokens, "promptTokensDetails", prompt}
	if final {
		cand = append(cand, "finishReason", geminiFinish(a.finish))
		usage = obj{"promptTokenCount", a.req.inputTokens, "candidatesTokenCount", a.out,
			"totalTokenCount", a.req.inputTokens + a.out + a.thinkTokens(), "promptTokensDetails", prompt,
			"candidatesTokensDetails", []any{obj{"modality", "TEXT", "tokenCount", a.out}}}
		if t := a.thinkTokens(); t > 0 {
			usage = append(usage, "thoughtsTokenCount", t)
		}
	}
	cand = append(cand, "index", 0)
	return obj{"candidates", []any{cand}, "usageMetadata", usage,
		"modelVersion", a.req.model, "responseId", a.id("", alnum, 23)}
}

// geminiThought is a chunk of the thinking phase: a part with thought true
// (thought summaries, includeThoughts).
func (a *answerPlan) geminiThought(text string) obj {
	prompt := []any{obj{"modality", "TEXT", "tokenCount", a.req.inputTokens}}
	return obj{"candidates", []any{obj{"content", obj{"parts", []any{obj{"text", text, "thought", true}}, "role", "model"}, "index", 0}},
		"usageMetadata", obj{"promptTokenCount", a.req.inputTokens, "totalTokenCount", a.req.inputTokens, "promptTokensDetails", prompt},
		"modelVersion", a.req.model, "responseId", a.id("", alnum, 23)}
}

func (geminiDialect) answer(a *answerPlan) (string, any) {
	return "application/json; charset=UTF-8", a.geminiChunk(a.text, true)
}

// midStreamBody is the error a broken Gemini stream carries: 503
// UNAVAILABLE, or (code containing "internal") 500 INTERNAL.
func midStreamBody(code string) []byte {
	if strings.Contains(strings.ToLower(code), "internal") {
		return geminiBody(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", nil)
	}
	return geminiBody(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)
}

func (d geminiDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	if !a.req.geminiSSE {
		d.streamArray(s, ctx, o, a)
		return
	}
	o.w.Header().Set("Content-Disposition", "attachment")
	o.start("text/event-stream")
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	if !s.think(ctx, o, a, func(p string) { o.data(a.geminiThought(p)) }) {
		return
	}
	chunks, broken := a.upToBreak(groupPieces(a.pieces, 6))
	n := len(chunks)
	i := 0
	ok := s.paced(ctx, o, a, chunks, func(p string) {
		i++
		o.data(a.geminiChunk(p, !broken && i == n))
	})
	if !ok {
		return
	}
	if s.broke(ctx, o, a) && a.d.kind == FaultMidStream {
		body := string(midStreamBody(a.d.code))
		if strings.Contains(a.d.code, "bare") {
			// Labelled "bare": the python-genai test fixture's form, a JSON
			// block outside any data: line. Not the documented framing.
			o.raw(body + "\n\n")
		} else {
			o.raw("data: " + body + "\n\n")
		}
	}
}

// streamArray answers streamGenerateContent without alt=sse: one JSON
// array of responses, written as it goes.
func (geminiDialect) streamArray(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	o.start("application/json; charset=UTF-8")
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	chunks, broken := a.upToBreak(groupPieces(a.pieces, 6))
	i := 0
	ok := s.paced(ctx, o, a, chunks, func(p string) {
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		i++
		o.raw(sep + string(mustJSON(a.geminiChunk(p, !broken && i == len(chunks)))))
	})
	if !ok {
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			o.raw(",\r\n" + string(midStreamBody(a.d.code)) + "]")
		}
		return
	}
	o.raw("]")
}

// ---- errors ---------------------------------------------------------------

// quotaReply is Gemini's 429 RESOURCE_EXHAUSTED with QuotaFailure, Help
// and RetryInfo details (per minute, or per day).
func geminiQuotaReply(e errorInfo, perDay bool) reply {
	if e.retryAfter <= 0 {
		e.retryAfter = 22 * time.Second
	}
	metric, quotaID, value := "generativelanguage.googleapis.com/generate_content_free_tier_requests",
		"GenerateRequestsPerMinutePerProjectPerModel-FreeTier", e.limit
	switch {
	case perDay:
		quotaID = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	case strings.Contains(e.metric, "tokens"):
		metric = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"
		quotaID = "GenerateContentInputTokensPerModelPerMinute-FreeTier"
	}
	if value == 0 {
		value = 10
	}
	msg := fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: %s, limit: %d, model: %s\nPlease retry in %s.",
		metric, value, e.model, protoDuration(e.retryAfter))
	details := []any{
		obj{
			"@type", "type.googleapis.com/google.rpc.QuotaFailure",
			"violations", []any{obj{
				"quotaMetric", metric,
				"quotaId", quotaID,
				"quotaDimensions", obj{"location", "global", "model", e.model},
				"quotaValue", strconv.FormatInt(value, 10),
			}},
		},
		obj{
			"@type", "type.googleapis.com/google.rpc.Help",
			"links", []any{obj{"description", "Learn more about Gemini API quotas", "url", "https://ai.google.dev/gemini-api/docs/rate-limits"}},
		},
		obj{"@type", "type.googleapis.com/google.rpc.RetryInfo", "retryDelay", protoDuration(e.retryAfter.Truncate(time.Second))},
	}
	return geminiReply(429, geminiBody(429, "RESOURCE_EXHAUSTED", msg, details))
}

func (geminiDialect) errorReply(e errorInfo) reply {
	switch e.kind {
	case FaultRateLimit, FaultSlowDown:
		return geminiQuotaReply(e, false)
	case FaultDailyQuota:
		// RetryInfo on a per-day quota names seconds, as the real one does,
		// though the quota only comes back at the daily reset.
		if e.retryAfter <= 0 || e.retryAfter > 22*time.Second {
			e.retryAfter = 22 * time.Second
		}
		return geminiQuotaReply(e, true)
	case FaultOverload, FaultFailoverDemo, FaultFlexCapacity:
		return geminiError(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
	case FaultSpendCap:
		return geminiError(402, "RESOURCE_EXHAUSTED", "Your prepayment credits are depleted. Please go to AI Studio at    https://ai.studio/projects to manage your project and billing. Learn more at https://ai.google.dev/gemini-api/docs/billing#prepay.")
	case FaultContextLength:
		maxTok, got := e.contextNumbers()
		return geminiError(400, "INVALID_ARGUMENT", fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", got, maxTok))
	case FaultRequestTooLarge:
		return geminiDialect{}.tooLarge(e)
	}
	if e.serverStatus() == 504 {
		return geminiError(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.")
	}
	return geminiError(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
}

func (geminiDialect) midStreamAsHTTP(e errorInfo) reply {
	b := midStreamBody(e.code)
	status := 503
	if strings.Contains(strings.ToLower(e.code), "internal") {
		status = 500
	}
	return geminiReply(status, b)
}

func (geminiDialect) tooLarge(errorInfo) reply {
	return geminiError(400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes.")
}

// limitHeaders: Gemini sends no rate-limit headers.
func (geminiDialect) limitHeaders(*provider, limitView, http.Header) {}
