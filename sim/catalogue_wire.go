package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// The catalogue on the wire: each dialect's not-found answer for a model
// outside the catalogue (given before any limit is spent or any stream
// starts), and the models endpoints and token counting that answer from
// the same catalogue.

// catalogueAPI is a dialect's models endpoints and token counting: handled
// is false for a path that is not one of them.
type catalogueAPI interface {
	catalogue(s *Server, p *provider, r *http.Request, sub string, req *simRequest) (rp reply, handled bool)
}

// ---- OpenAI-compatible ----------------------------------------------------

func (openAIDialect) modelNotFound(p *provider, model, _ string) reply {
	e := p.compat.modelNotFound.render("{model}", model)
	e.message += unknownModelHint(p.name, model)
	return p.compat.reply(e)
}

func openAIModel(m ModelInfo) obj {
	return obj{"id", m.ID, "object", "model", "created", m.createdUnix(), "owned_by", "system"}
}

// catalogue serves GET /models and GET /models/{id} (OpenAI's models.list
// and models.retrieve; the compatible providers answer the same shape).
func (openAIDialect) catalogue(s *Server, p *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	id, one := strings.CutPrefix(sub, "/models/")
	if sub != "/models" && !one {
		return reply{}, false
	}
	if r.Method != http.MethodGet {
		return p.compat.notFoundReply(r.Method, strings.TrimPrefix(r.URL.Path, "/"+p.name)), true
	}
	if bad, ok := p.d.auth(p, r, req.requestID); !ok {
		return bad, true
	}
	if one {
		m, ok := s.model(p.name, id)
		if !ok {
			return p.d.modelNotFound(p, id, req.requestID), true
		}
		return jsonReply(200, mustJSON(openAIModel(m))), true
	}
	data := []any{}
	for _, m := range s.models(p.name) {
		data = append(data, openAIModel(m))
	}
	return jsonReply(200, mustJSON(obj{"object", "list", "data", data})), true
}

// ---- Anthropic --------------------------------------------------------------

func (anthropicDialect) modelNotFound(p *provider, model, requestID string) reply {
	return anthropicError(404, "not_found_error", "model: "+model+unknownModelHint(p.name, model), requestID)
}

func anthropicModel(m ModelInfo) obj {
	return obj{"type", "model", "id", m.ID, "display_name", m.DisplayName, "created_at", m.createdRFC3339()}
}

// catalogue serves GET /v1/models, GET /v1/models/{id} and POST
// /v1/messages/count_tokens.
func (d anthropicDialect) catalogue(s *Server, p *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	id, one := strings.CutPrefix(sub, "/v1/models/")
	count := sub == "/v1/messages/count_tokens"
	if sub != "/v1/models" && !one && !count {
		return reply{}, false
	}
	notFound := jsonReply(404, anthropicBody("not_found_error", "The requested resource could not be found.", req.requestID, nil))
	if (count && r.Method != http.MethodPost) || (!count && r.Method != http.MethodGet) {
		return notFound, true
	}
	if bad, ok := d.auth(p, r, req.requestID); !ok {
		return bad, true
	}
	switch {
	case count:
		body, bad, ok := readCatalogueBody(r, func() reply {
			return anthropicError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", req.requestID)
		})
		if !ok {
			return bad, true
		}
		// count_tokens takes a Messages body without max_tokens.
		var in map[string]json.RawMessage
		if json.Unmarshal(body, &in) == nil && in != nil {
			if _, has := in["max_tokens"]; !has {
				in["max_tokens"] = json.RawMessage("1")
			}
			delete(in, "stream")
			body = mustJSON(in)
		}
		if bad, ok := d.parse(p, body, r, req, req.requestID); !ok {
			return bad, true
		}
		if _, ok := s.model(p.name, req.model); !ok {
			return d.modelNotFound(p, req.model, req.requestID), true
		}
		return jsonReply(200, mustJSON(obj{"input_tokens", req.inputTokens})), true
	case one:
		m, ok := s.model(p.name, id)
		if !ok {
			return d.modelNotFound(p, id, req.requestID), true
		}
		return jsonReply(200, mustJSON(anthropicModel(m))), true
	}
	data := []any{}
	models := s.models(p.name)
	for _, m := range models {
		data = append(data, anthropicModel(m))
	}
	var first, last any
	if len(models) > 0 {
		first, last = models[0].ID, models[len(models)-1].ID
	}
	return jsonReply(200, mustJSON(obj{"data", data, "has_more", false, "first_id", first, "last_id", last})), true
}

// ---- Gemini -------------------------------------------------------------------

func geminiNotFound(provider, model, method string) reply {
	return geminiError(404, "NOT_FOUND", "models/"+model+" is not found for API version v1beta, or is not supported for "+method+
		". Call ListModels to see the list of available models and their supported methods."+unknownModelHint(provider, model))
}

func (geminiDialect) modelNotFound(p *provider, model, _ string) reply {
	return geminiNotFound(p.name, model, "generateContent")
}

func geminiModel(m ModelInfo) obj {
	return obj{"name", "models/" + m.ID, "version", "001", "displayName", m.DisplayName,
		"description", m.DisplayName + " (simulated)", "inputTokenLimit", m.ContextWindow, "outputTokenLimit", m.MaxOutput,
		"supportedGenerationMethods", []string{"generateContent", "countTokens"},
		"temperature", 1, "topP", 0.95, "topK", 64, "maxTemperature", 2, "thinking", true}
}

// catalogue serves GET /v1beta/models (models.list), GET
// /v1beta/models/{id} (models.get) and POST /v1beta/models/{id}:countTokens
// (and the same under /v1).
func (d geminiDialect) catalogue(s *Server, p *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	rest, found := strings.CutPrefix(sub, "/v1beta/models")
	if !found {
		if rest, found = strings.CutPrefix(sub, "/v1/models"); !found {
			return reply{}, false
		}
	}
	id, one := strings.CutPrefix(rest, "/")
	model, method, hasMethod := strings.Cut(id, ":")
	count := hasMethod && method == "countTokens"
	switch {
	case rest == "" || (one && !hasMethod && id != ""):
		if r.Method != http.MethodGet {
			return geminiError(404, "NOT_FOUND", "Requested entity was not found."), true
		}
	case count:
		if r.Method != http.MethodPost {
			return geminiError(404, "NOT_FOUND", "Requested entity was not found."), true
		}
	default:
		return reply{}, false // generateContent and the rest: the generation route
	}
	if bad, ok := d.auth(p, r, req.requestID); !ok {
		return bad, true
	}
	switch {
	case count:
		body, bad, ok := readCatalogueBody(r, func() reply {
			return geminiError(400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes.")
		})
		if !ok {
			return bad, true
		}
		// countTokens takes {contents} or {generateContentRequest: {...}}.
		var wrapped struct {
			Req json.RawMessage `json:"generateContentRequest"`
		}
		if json.Unmarshal(body, &wrapped) == nil && len(wrapped.Req) > 0 {
			body = wrapped.Req
		}
		if _, ok := s.model(p.name, model); !ok {
			return geminiNotFound(p.name, model, "countTokens"), true
		}
		if bad, ok := d.parse(p, body, r, req, req.requestID); !ok {
			return bad, true
		}
		return geminiReply(200, mustJSON(obj{"totalTokens", req.inputTokens,
			"promptTokensDetails", []any{obj{"modality", "TEXT", "tokenCount", req.inputTokens}}})), true
	case rest != "":
		m, ok := s.model(p.name, model)
		if !ok {
			return geminiNotFound(p.name, model, "generateContent"), true
		}
		return geminiReply(200, mustJSON(geminiModel(m))), true
	}
	list := []any{}
	for _, m := range s.models(p.name) {
		list = append(list, geminiModel(m))
	}
	return geminiReply(200, mustJSON(obj{"models", list})), true
}

// ---- the Interactions API, the Responses API, Bedrock -----------------------

func (interactionsDialect) modelNotFound(p *provider, model, _ string) reply {
	return ixReply(404, "model_not_found", "Model "+model+" not found."+unknownModelHint(p.name, model))
}

func (bedrockDialect) modelNotFound(p *provider, model, _ string) reply {
	return awsError(404, "ResourceNotFoundException", "Model not found: the provided model identifier "+model+" is invalid."+unknownModelHint(p.name, model))
}

// readCatalogueBody reads a token-counting request's body (at most
// maxRequestBody): false with the dialect's too-large answer.
func readCatalogueBody(r *http.Request, tooLarge func() reply) ([]byte, reply, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil || len(b) > maxRequestBody {
		return nil, tooLarge(), false
	}
	return b, reply{}, true
}
