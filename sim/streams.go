package sim

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// answerPlan is one answer to write: its text, usage, ids and pace, and the
// fault (cut, mid_stream, stall) that interrupts it, if any.
type answerPlan struct {
	req     *simRequest
	d       decision
	pieces  []string
	text    string
	out     int
	finish  string // "stop" or "length"
	pace    pacing
	created time.Time
	ids     uint64
}

// upToBreak returns the pieces sent before a cut, a mid-stream error or a
// stall (half of them, at least one; one for a stall), and whether the
// stream breaks at all.
func (a *answerPlan) upToBreak(ps []string) ([]string, bool) {
	brk := -1
	switch a.d.kind {
	case FaultCut, FaultMidStream:
		brk = max(1, len(ps)/2)
	case FaultHang:
		brk = 1
	}
	if brk < 0 {
		return ps, false
	}
	return ps[:min(brk, len(ps))], true
}

func (a *answerPlan) id(prefix, set string, n int) string {
	return prefix + randChars(rand.New(rand.NewPCG(a.ids, 0x1d5)), set, n)
}

// sseOut writes SSE frames and flushes each; the first write error sticks.
type sseOut struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func newSSE(w http.ResponseWriter) *sseOut {
	return &sseOut{w: w, rc: http.NewResponseController(w)}
}

func (o *sseOut) start(contentType string) {
	o.w.Header().Set("Content-Type", contentType)
	o.w.Header().Set("Cache-Control", "no-cache")
	o.w.WriteHeader(http.StatusOK)
	o.flush()
}

func (o *sseOut) raw(s string) {
	if o.err != nil {
		return
	}
	if _, o.err = io.WriteString(o.w, s); o.err == nil {
		o.flush()
	}
}

func (o *sseOut) flush() {
	if o.err == nil {
		o.err = o.rc.Flush()
	}
}

func (o *sseOut) data(v any) { o.raw("data: " + string(mustJSON(v)) + "\n\n") }
func (o *sseOut) event(name string, v any) {
	o.raw("event: " + name + "\ndata: " + string(mustJSON(v)) + "\n\n")
}

// queue sends keep-alive comments while a DeepSeek-style queue delay runs.
func (s *Server) queue(ctx context.Context, o *sseOut, p pacing) bool {
	for left := p.queue; left > 0; left -= time.Second {
		if !p.sleep(ctx, s.closed, min(left, time.Second)) {
			return false
		}
		o.raw(": keep-alive\n\n")
	}
	return o.err == nil
}

// pieces streams the answer's pieces through emit at the plan's pace, up to
// stop (exclusive; -1 for all). It returns false when the client went away.
func (s *Server) paced(ctx context.Context, o *sseOut, a *answerPlan, pieces []string, emit func(string)) bool {
	var owed time.Duration
	for _, p := range pieces {
		owed += time.Duration(float64(a.pace.perToken) * float64(len(p)) / 4) // about four characters a token
		if owed >= 2*time.Millisecond {
			if !a.pace.sleep(ctx, s.closed, owed) {
				return false
			}
			owed = 0
		}
		emit(p)
		if o.err != nil {
			return false
		}
	}
	return true
}

// interrupt ends a stream broken by a fault: a stall hangs, a cut just
// returns (the body ends without its end event).
func (s *Server) stall(ctx context.Context, w http.ResponseWriter, a *answerPlan) {
	if a.d.kind == FaultHang && s.hang(ctx) {
		resetConn(w)
	}
}

// ---- OpenAI and compatible ----------------------------------------------

type oaDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Delta        oaDelta         `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type oaChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	Choices           []oaChoice      `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
	XGroq             any             `json:"x_groq,omitempty"`
}

var null = json.RawMessage("null")

func (s *Server) streamOpenAI(ctx context.Context, o *sseOut, a *answerPlan, cfg *providerConfig) {
	prov := a.req.provider
	chunk := oaChunk{ID: a.id("chatcmpl-", alnum, 29), Object: "chat.completion.chunk", Created: a.created.Unix(),
		Model: a.req.model, SystemFingerprint: "fp_sim" + a.id("", hexDigits, 6)}
	if prov == "mistral" || prov == "xai" {
		chunk.SystemFingerprint = ""
	}
	if a.req.includeUsage {
		chunk.Usage = null
	}
	usage := mustJSON(oaUsage{a.req.inputTokens, a.out, a.req.inputTokens + a.out})
	o.start("text/event-stream; charset=utf-8")
	if !s.queue(ctx, o, a.pace) {
		return
	}
	empty := ""
	first := chunk
	first.Choices = []oaChoice{{Delta: oaDelta{Role: "assistant", Content: &empty}, Logprobs: null}}
	if prov == "groq" {
		first.XGroq = obj{"id", a.d.requestID}
	}
	o.data(first)
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	pieces, _ := a.upToBreak(a.pieces)
	ok := s.paced(ctx, o, a, pieces, func(p string) {
		c := chunk
		c.Choices = []oaChoice{{Delta: oaDelta{Content: &p}, Logprobs: null}}
		o.data(c)
	})
	if !ok {
		return
	}
	switch a.d.kind {
	case FaultMidStream:
		msg, typ, code := "Our servers are currently overloaded. Please try again later.", "service_unavailable_error", "server_is_overloaded"
		if a.d.code == "server_error" {
			msg, typ, code = "The server had an error while processing your request. Sorry about that!", "server_error", "server_error"
		}
		o.data(obj{"error", obj{"message", msg, "type", typ, "param", nil, "code", code}})
		return
	case FaultCut:
		return
	case FaultHang:
		s.stall(ctx, o.w, a)
		return
	}
	fin := a.finish
	last := chunk
	last.Choices = []oaChoice{{Delta: oaDelta{}, Logprobs: null, FinishReason: &fin}}
	if prov == "mistral" {
		last.Usage = usage // Mistral reports usage on its finish chunk
	}
	o.data(last)
	if a.req.includeUsage && prov != "mistral" {
		u := chunk
		u.Choices = []oaChoice{}
		u.Usage = usage
		o.data(u)
	}
	o.raw("data: [DONE]\n\n")
}

// ---- Anthropic -----------------------------------------------------------

func (s *Server) streamAnthropic(ctx context.Context, o *sseOut, a *answerPlan) {
	msgID := a.id("msg_01", base58, 22)
	o.start("text/event-stream; charset=utf-8")
	o.event("message_start", obj{"type", "message_start", "message", obj{
		"id", msgID, "type", "message", "role", "assistant", "model", a.req.model, "content", []any{},
		"stop_reason", nil, "stop_sequence", nil,
		"usage", obj{"input_tokens", a.req.inputTokens, "output_tokens", 1}}})
	o.event("content_block_start", obj{"type", "content_block_start", "index", 0,
		"content_block", obj{"type", "text", "text", ""}})
	o.event("ping", obj{"type", "ping"})
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	pieces, _ := a.upToBreak(a.pieces)
	ok := s.paced(ctx, o, a, pieces, func(p string) {
		o.event("content_block_delta", obj{"type", "content_block_delta", "index", 0,
			"delta", obj{"type", "text_delta", "text", p}})
	})
	if !ok {
		return
	}
	switch a.d.kind {
	case FaultMidStream:
		typ, msg := "overloaded_error", "Overloaded"
		if a.d.code == "api_error" {
			typ, msg = "api_error", "Internal server error"
		}
		o.event("error", obj{"type", "error", "error", obj{"type", typ, "message", msg}})
		return
	case FaultCut:
		return
	case FaultHang:
		s.stall(ctx, o.w, a)
		return
	}
	stop := "end_turn"
	if a.finish == "length" {
		stop = "max_tokens"
	}
	o.event("content_block_stop", obj{"type", "content_block_stop", "index", 0})
	o.event("message_delta", obj{"type", "message_delta",
		"delta", obj{"stop_reason", stop, "stop_sequence", nil},
		"usage", obj{"output_tokens", a.out}})
	o.event("message_stop", obj{"type", "message_stop"})
}

// ---- Gemini ----------------------------------------------------------------

func geminiFinish(f string) string {
	if f == "length" {
		return "MAX_TOKENS"
	}
	return "STOP"
}

func (a *answerPlan) geminiChunk(text string, final bool) obj {
	cand := obj{"content", obj{"parts", []any{obj{"text", text}}, "role", "model"}}
	usage := obj{"promptTokenCount", a.req.inputTokens, "totalTokenCount", a.req.inputTokens}
	if final {
		cand = append(cand, "finishReason", geminiFinish(a.finish))
		usage = obj{"promptTokenCount", a.req.inputTokens, "candidatesTokenCount", a.out,
			"totalTokenCount", a.req.inputTokens + a.out}
	}
	cand = append(cand, "index", 0)
	return obj{"candidates", []any{cand}, "usageMetadata", usage,
		"modelVersion", a.req.model, "responseId", a.id("", alnum, 23)}
}

func (s *Server) streamGemini(ctx context.Context, o *sseOut, a *answerPlan) {
	o.w.Header().Set("Content-Disposition", "attachment")
	o.start("text/event-stream")
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
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
	switch a.d.kind {
	case FaultMidStream:
		code, status, msg := 503, "UNAVAILABLE", "The model is overloaded. Please try again later."
		if strings.Contains(a.d.code, "internal") || strings.Contains(a.d.code, "INTERNAL") {
			code, status, msg = 500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
		}
		body := string(geminiBody(code, status, msg, nil))
		if strings.Contains(a.d.code, "bare") {
			o.raw(body + "\n\n") // the python-genai fixture's form: a bare JSON block, not a data: line
		} else {
			o.raw("data: " + body + "\n\n")
		}
	case FaultHang:
		s.stall(ctx, o.w, a)
	}
}

// streamGeminiArray answers streamGenerateContent without alt=sse: one JSON
// array of responses, written as it goes.
func (s *Server) streamGeminiArray(ctx context.Context, o *sseOut, a *answerPlan) {
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
	switch a.d.kind {
	case FaultMidStream:
		o.raw(",\r\n" + string(geminiBody(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)) + "]")
	case FaultCut:
	case FaultHang:
		s.stall(ctx, o.w, a)
	default:
		o.raw("]")
	}
}

// ---- non-streaming -----------------------------------------------------------

func writeJSONAnswer(w http.ResponseWriter, a *answerPlan) {
	var body any
	ct := "application/json"
	switch a.req.provider {
	case "anthropic":
		stop := "end_turn"
		if a.finish == "length" {
			stop = "max_tokens"
		}
		body = obj{"id", a.id("msg_01", base58, 22), "type", "message", "role", "assistant", "model", a.req.model,
			"content", []any{obj{"type", "text", "text", a.text}}, "stop_reason", stop, "stop_sequence", nil,
			"usage", obj{"input_tokens", a.req.inputTokens, "output_tokens", a.out}}
	case "gemini":
		ct = "application/json; charset=UTF-8"
		body = a.geminiChunk(a.text, true)
	default:
		body = obj{"id", a.id("chatcmpl-", alnum, 29), "object", "chat.completion", "created", a.created.Unix(),
			"model", a.req.model, "choices", []any{obj{"index", 0,
				"message", obj{"role", "assistant", "content", a.text, "refusal", nil},
				"logprobs", nil, "finish_reason", a.finish}},
			"usage", oaUsage{a.req.inputTokens, a.out, a.req.inputTokens + a.out}}
	}
	b := mustJSON(body)
	w.Header().Set("Content-Type", ct)
	writeReply(w, reply{status: http.StatusOK, header: http.Header{}, body: b})
}
