package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var updateCompatBodies = flag.Bool("update-compat-bodies", false, "rewrite testdata/compat_bodies.json from the current code")

// compatCase is one error answer an OpenAI-compatible provider renders.
type compatCase struct {
	name   string
	render func(p *provider) reply
}

// compatCases renders every fault kind, with the variants and numbers the
// bodies depend on, and the route, auth and model answers.
func compatCases() []compatCase {
	var cs []compatCase
	fault := func(name string, e errorInfo) {
		cs = append(cs, compatCase{name, func(p *provider) reply {
			e.provider, e.model = p.name, "model-x"
			return openAIDialect{}.errorReply(e)
		}})
	}
	numbers := errorInfo{limit: 500, used: 497, requested: 7, retryAfter: 1500 * time.Millisecond, requestID: "req-1"}
	codes := map[string][]string{
		FaultRateLimit: {""}, FaultSlowDown: {""}, FaultFlexCapacity: {""},
		FaultOverload: {"", "503"}, FaultFailoverDemo: {"", "503"},
		FaultSpendCap:        {"", "tpd", "429", "credit_balance_exhausted", "project_spend_limit_exceeded", "unknown"},
		FaultDailyQuota:      {"", "tpd", "rpd"},
		FaultContextLength:   {""},
		FaultRequestTooLarge: {""},
		FaultServerError:     {"", "502", "504"},
	}
	for kind, cc := range codes {
		for _, code := range cc {
			for _, metric := range []string{"", "tokens", "input tokens"} {
				e := errorInfo{kind: kind, code: code, metric: metric}
				fault(fmt.Sprintf("%s/%s/%s/zero", kind, code, metric), e)
				n := numbers
				n.kind, n.code, n.metric = kind, code, metric
				fault(fmt.Sprintf("%s/%s/%s/numbers", kind, code, metric), n)
			}
		}
	}
	for _, code := range []string{"", "server_error", "overloaded"} {
		cs = append(cs, compatCase{"mid_stream_as_http/" + code, func(p *provider) reply {
			return openAIDialect{}.midStreamAsHTTP(errorInfo{provider: p.name, kind: FaultMidStream, code: code})
		}})
	}
	for _, given := range []bool{false, true} {
		cs = append(cs, compatCase{fmt.Sprintf("auth/%v", given), func(p *provider) reply {
			return p.compat.authReply(given, "req-auth")
		}})
	}
	cs = append(cs,
		compatCase{"not_found", func(p *provider) reply { return p.compat.notFoundReply("GET", "/v1/nowhere") }},
		compatCase{"model_not_found", func(p *provider) reply { return openAIDialect{}.modelNotFound(p, "no-such-model", "req-m") }},
		compatCase{"invalid/plain", func(p *provider) reply { return openAIDialect{}.invalid(p, "you must provide a model parameter", "") }},
		compatCase{"invalid/missing", func(p *provider) reply {
			return openAIDialect{}.invalid(p, "Missing required parameter: 'messages'.", "messages")
		}},
	)
	return cs
}

// renderedReply is one answer as the golden file holds it.
type renderedReply struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   string              `json:"body"`
}

// TestCompatErrorBodiesUnchanged renders every OpenAI-compatible provider's
// answer to every fault kind and compares it, byte for byte, with the
// bodies recorded in testdata/compat_bodies.json. A provider the file does
// not hold yet must still render every case.
func TestCompatErrorBodiesUnchanged(t *testing.T) {
	path := filepath.Join("testdata", "compat_bodies.json")
	got := map[string]map[string]renderedReply{}
	for _, p := range providers {
		if p.compat == nil {
			continue
		}
		got[p.name] = map[string]renderedReply{}
		for _, c := range compatCases() {
			r := c.render(p)
			if r.status < 400 || len(r.body) == 0 {
				t.Errorf("%s %s: status %d, %d body bytes", p.name, c.name, r.status, len(r.body))
			}
			got[p.name][c.name] = renderedReply{Status: r.status, Header: r.header, Body: string(r.body)}
		}
	}
	if *updateCompatBodies {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string]renderedReply
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 5 {
		t.Fatalf("the golden file holds %d providers, want the five it was recorded with", len(want))
	}
	for name, cases := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: in the golden file, not an OpenAI-compatible provider of the table", name)
			continue
		}
		keys := make([]string, 0, len(cases))
		for k := range cases {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w, r := cases[k], g[k]
			if w.Status != r.Status || !bytes.Equal([]byte(w.Body), []byte(r.Body)) || !sameHeader(w.Header, r.Header) {
				t.Errorf("%s %s:\n got %d %v %s\nwant %d %v %s", name, k, r.Status, r.Header, r.Body, w.Status, w.Header, w.Body)
			}
		}
		if len(g) != len(cases) {
			t.Errorf("%s: %d cases rendered, the golden file holds %d", name, len(g), len(cases))
		}
	}
}

func sameHeader(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
