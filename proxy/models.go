package proxy

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"

	"github.com/limitscope/limitscope/stream"
)

// modelEntry is one routable name.
type modelEntry struct {
	id      string
	ownedBy string // "limitscope" for an alias, else the provider
}

func (h *Handler) aliasNames() []string {
	names := make([]string, 0, len(h.cfg.Aliases))
	for n := range h.cfg.Aliases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// routable lists the aliases (those with a target that has a key), then
// every provider/model named in the config whose provider has a key, then
// the default model of every provider (and API variant) with a key, in
// the provider table's order: what a caller can send as its model.
func (h *Handler) routable() []modelEntry {
	avail := func(p string) bool { return h.o.Available == nil || h.o.Available(p) }
	var out []modelEntry
	seen := map[string]bool{}
	var targets []stream.Target
	for _, n := range h.aliasNames() {
		a := h.cfg.Aliases[n]
		ok := false
		for _, t := range a.Chain {
			ok = ok || avail(t.Provider)
			targets = append(targets, t)
		}
		if ok {
			out = append(out, modelEntry{id: n, ownedBy: "limitscope"})
			seen[n] = true
		}
	}
	targets = append(targets, h.cfg.Models...)
	for _, p := range stream.Providers() {
		if p.DefaultModel != "" {
			targets = append(targets, stream.Target{Provider: p.Name, Model: p.DefaultModel})
		}
	}
	for _, t := range targets {
		if id := t.String(); avail(t.Provider) && !seen[id] {
			seen[id] = true
			out = append(out, modelEntry{id: id, ownedBy: t.Provider})
		}
	}
	return out
}

// Targets lists every provider/model the proxy routes to: its aliases'
// chains, the config's models and each provider's default model, whether
// its provider has a key or not (the bounded label values of the metrics).
func (h *Handler) Targets() []stream.Target {
	var out []stream.Target
	for _, n := range h.aliasNames() {
		out = append(out, h.cfg.Aliases[n].Chain...)
	}
	out = append(out, h.cfg.Models...)
	for _, p := range stream.Providers() {
		if p.DefaultModel != "" {
			out = append(out, stream.Target{Provider: p.Name, Model: p.DefaultModel})
		}
	}
	return out
}

// models answers GET /v1/models and /v1/models/{id}, in Anthropic's format
// when the caller sends anthropic-version, else in OpenAI's.
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	d := callerDialect(r)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, class: stream.ClassCaller,
			message: "limitscope proxy: use GET"}, d, "")
		return
	}
	list := h.routable()
	render := func(m modelEntry) map[string]any {
		if d == stream.DialectAnthropic {
			return map[string]any{"type": "model", "id": m.id, "display_name": m.id, "created_at": "1970-01-01T00:00:00Z"}
		}
		return map[string]any{"id": m.id, "object": "model", "created": 0, "owned_by": m.ownedBy}
	}
	if id := r.PathValue("id"); id != "" {
		for _, m := range list {
			if m.id == id {
				writeJSON(w, http.StatusOK, render(m))
				return
			}
		}
		// A provider/model or a bare name the proxy can route is a model too.
		if rt, e := h.route(id); e == nil && !strings.Contains(id, " ") {
			writeJSON(w, http.StatusOK, render(modelEntry{id: id, ownedBy: rt.Chain[0].Provider}))
			return
		}
		writeError(w, &apiError{status: http.StatusNotFound, class: stream.ClassCaller, code: "model_not_found",
			message: "limitscope proxy: no route for model " + id}, d, "")
		return
	}
	data := make([]any, 0, len(list))
	for _, m := range list {
		data = append(data, render(m))
	}
	if d == stream.DialectAnthropic {
		v := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(list) > 0 {
			v["first_id"], v["last_id"] = list[0].id, list[len(list)-1].id
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// maxSuggestions bounds the models an unknown model's error names.
const maxSuggestions = 8

// unknownModel explains in one line a provider's 404 for a model it does
// not know (nil when the call did not end that way): the provider's own
// status, code and message, and the models of that provider the proxy
// lists, as suggestions.
func (h *Handler) unknownModel(res retry.Result, caller stream.Dialect, now time.Time) *apiError {
	if res.Err == nil || res.Err.Class != stream.ClassCaller || res.Err.Status != http.StatusNotFound || len(res.Attempts) == 0 {
		return nil
	}
	t := res.Attempts[len(res.Attempts)-1].Target
	ae := callError(res, caller, now)
	msg := strings.Join(strings.Fields(ae.message), " ")
	ae.message = fmt.Sprintf("limitscope: %s does not know the model %q (its 404", t.Provider, t.Model)
	if ae.code != "" {
		ae.message += " " + ae.code
	}
	ae.message += ": " + msg + ")"
	var names []string
	for _, m := range h.routable() {
		if m.ownedBy == t.Provider && m.id != t.String() && len(names) < maxSuggestions {
			names = append(names, m.id)
		}
	}
	if len(names) > 0 {
		ae.message += "; models this proxy serves on " + t.Provider + ": " + strings.Join(names, ", ")
	}
	return ae
}
