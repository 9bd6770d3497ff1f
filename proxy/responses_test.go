package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/limitscope/limitscope/sim"
)

// responsesRun is what openai-go's Responses client read.
type responsesRun struct {
	text, terminal, model, errCode string
	usage                          responses.ResponseUsage
	outputText                     string // the terminal event's response.OutputText()
	seqs                           []int64
	err                            error
}

func (e *env) responsesStream(ctx context.Context, p responses.ResponseNewParams) responsesRun {
	st := e.openAI(testToken).Responses.NewStreaming(ctx, p)
	defer st.Close()
	var r responsesRun
	for st.Next() {
		ev := st.Current()
		r.seqs = append(r.seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			r.text += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			r.terminal, r.usage, r.model = ev.Type, ev.Response.Usage, ev.Response.Model
			r.outputText = ev.Response.OutputText()
		case "error":
			r.errCode = ev.Code
		}
	}
	r.err = st.Err()
	return r
}

func responsesParams(model, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: model, Instructions: openai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
}

// openai-go's Responses client, streaming and not, through the proxy to
// every upstream dialect: the text, the terminal event, the usage and the
// model that answered, one request upstream each.
func TestSDKResponses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ target, provider, model string }{
		{"openai/gpt-5.4-mini", "openai", "gpt-5.4-mini"},
		{"openai:responses/gpt-5.4-mini", "openai", "gpt-5.4-mini"},
		{"anthropic/claude-haiku-5-5", "anthropic", "claude-haiku-5-5"},
		{"gemini/gemini-2.5-flash", "gemini", "gemini-2.5-flash"},
	} {
		t.Run(c.target, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			r := e.responsesStream(ctx, responsesParams(c.target, "Say hello"))
			if r.err != nil || r.terminal != "response.completed" || r.model != c.model {
				t.Fatalf("err %v terminal %q model %q", r.err, r.terminal, r.model)
			}
			if !strings.Contains(r.text, c.model) || r.outputText != r.text || r.usage.InputTokens == 0 || r.usage.OutputTokens == 0 ||
				r.usage.TotalTokens != r.usage.InputTokens+r.usage.OutputTokens {
				t.Errorf("text %q output %q usage %+v", r.text, r.outputText, r.usage)
			}
			for i, s := range r.seqs {
				if s != int64(i) {
					t.Fatalf("sequence numbers %v, want 0, 1, 2...", r.seqs)
				}
			}
			res, err := e.openAI(testToken).Responses.New(ctx, responsesParams(c.target, "Say hello"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != "completed" || res.Model != c.model || !strings.Contains(res.OutputText(), c.model) || res.Usage.OutputTokens == 0 {
				t.Errorf("response %+v", res)
			}
			if n := e.requests(c.provider); n != 2 {
				t.Errorf("%s saw %d requests, want 2", c.provider, n)
			}
		})
	}
	t.Run("conversation and max_output_tokens", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		p := responses.ResponseNewParams{Model: "anthropic/claude-haiku-5-5", MaxOutputTokens: openai.Int(16),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("be brief", responses.EasyInputMessageRoleDeveloper),
				responses.ResponseInputItemParamOfMessage("Tell me a long story", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("Once", responses.EasyInputMessageRoleAssistant),
				responses.ResponseInputItemParamOfMessage("go on", responses.EasyInputMessageRoleUser),
			}}}
		r := e.responsesStream(ctx, p)
		if r.err != nil || r.terminal != "response.incomplete" || r.usage.OutputTokens != 16 {
			t.Fatalf("err %v terminal %q usage %+v", r.err, r.terminal, r.usage)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if c := e.calls[0]; c.System != "be brief" || len(c.Messages) != 3 || c.Messages[1].Role != "assistant" || c.MaxTokens != 16 {
			t.Errorf("call sent %+v", c)
		}
	})
	t.Run("failover", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 10})
		r := e.responsesStream(ctx, responsesParams("fast", "Say hello"))
		if r.err != nil || r.terminal != "response.completed" || r.model != "claude-haiku-5-5" {
			t.Fatalf("err %v terminal %q model %q", r.err, r.terminal, r.model)
		}
		if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 1 {
			t.Errorf("openai %d anthropic %d requests, want 1 and 1", a, b)
		}
	})
	t.Run("broken after text", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream})
		p := responsesParams("anthropic/claude-haiku-5-5", "Tell me a long story")
		p.MaxOutputTokens = openai.Int(300)
		r := e.responsesStream(ctx, p)
		if r.err == nil || !strings.Contains(r.err.Error(), "overloaded") || r.text == "" {
			t.Errorf("err %v after %q", r.err, r.text)
		}
		if n, h := e.requests("anthropic"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("anthropic saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
	})
	t.Run("quota stop", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap, Code: "credit_balance_exhausted", Count: 10})
		r := e.responsesStream(ctx, responsesParams("openai/gpt-5.4-mini", "hi"))
		var ae *openai.Error
		if !errors.As(r.err, &ae) || ae.StatusCode != 429 || ae.Code != "credit_balance_exhausted" {
			t.Fatalf("error %v", r.err)
		}
		if n, h := e.requests("openai"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("openai saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
	})
}

// What the Responses API has and other providers cannot take is a 400
// naming the field, before any provider is called.
func TestResponsesRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, c := range []struct{ body, param string }{
		{`{"model":"openai/gpt-5.4-mini","input":"hi","tools":[{"type":"web_search"}]}`, "tools"},
		{`{"model":"openai/gpt-5.4-mini","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"openai/gpt-5.4-mini","input":"hi","background":true}`, "background"},
		{`{"model":"openai/gpt-5.4-mini","input":"hi","text":{"format":{"type":"json_schema"}}}`, "text.format"},
		{`{"model":"openai/gpt-5.4-mini","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input[0].type"},
		{`{"model":"openai/gpt-5.4-mini","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type"},
		{`{"model":"openai/gpt-5.4-mini","input":"hi","tool_choice":"required"}`, "tool_choice"},
	} {
		r, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/responses", strings.NewReader(c.body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		got := e.do(r)
		if got.status != 400 || dig(got.json(t), "error", "param") != c.param || got.header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: %d %s", c.body, got.status, got.body)
		}
	}
	if n := e.requests("openai"); n != 0 {
		t.Errorf("openai saw %d requests, want 0", n)
	}
}
