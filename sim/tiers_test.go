package sim

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/limitscope/limitscope/stream"
)

// TestOpenAISDKTiers drives the simulator's service tiers with openai-go:
// the tier it sends is taken, a flex request meets the flex_capacity
// fault as a 429 (its body assumed: OpenAI documents none), a priority
// request meets a downgrade that only the chunks' service_tier shows, and
// an unknown tier is the documented 400.
func TestOpenAISDKTiers(t *testing.T) {
	s, url, count := sdkSim(t)
	client := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey), ooption.WithMaxRetries(0))
	params := func(tier openai.ChatCompletionNewParamsServiceTier) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "gpt-5.4-mini", ServiceTier: tier,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
	}
	ctx := sdkCtx(t)

	// A flex_capacity fault passes a default request by, and hits the flex one.
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultFlexCapacity}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Chat.Completions.New(ctx, params("default")); err != nil {
		t.Fatalf("a default request met the flex fault: %v", err)
	}
	_, err := client.Chat.Completions.New(ctx, params("flex"))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || !strings.Contains(ae.Message, "Resource Unavailable") {
		t.Fatalf("flex: %v, want the 429 Resource Unavailable", err)
	}

	// A priority request downgraded: every chunk says default.
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultTierDowngrade}); err != nil {
		t.Fatal(err)
	}
	st := client.Chat.Completions.NewStreaming(ctx, params("priority"))
	var tiers []string
	for st.Next() {
		tiers = append(tiers, string(st.Current().ServiceTier))
	}
	if st.Err() != nil || len(tiers) == 0 {
		t.Fatalf("stream: %v, %d chunks", st.Err(), len(tiers))
	}
	for _, tier := range tiers {
		if tier != "default" {
			t.Fatalf("downgraded chunks say %v, want default", tiers)
		}
	}
	// Served as asked without the fault.
	res, err := client.Chat.Completions.New(ctx, params("priority"))
	if err != nil || res.ServiceTier != "priority" {
		t.Fatalf("priority: %v, served %q", err, res.ServiceTier)
	}

	_, err = client.Chat.Completions.New(ctx, params("turbo"))
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message != "Invalid service_tier argument" || ae.Param != "service_tier" {
		t.Fatalf("unknown tier: %v, want the 400 Invalid service_tier argument", err)
	}
	if n := count(); n != 5 {
		t.Errorf("%d requests, want 5", n)
	}
}

// TestAnthropicSDKTiers: anthropic-sdk-go's service_tier is taken and the
// answer's usage.service_tier names the tier; an unknown tier is a 400.
func TestAnthropicSDKTiers(t *testing.T) {
	_, url, _ := sdkSim(t)
	client := anthropic.NewClient(aoption.WithBaseURL(url+"/anthropic"), aoption.WithAPIKey(FakeKey), aoption.WithMaxRetries(0))
	p := anthropic.MessageNewParams{Model: "claude-haiku-5-5", MaxTokens: 64, ServiceTier: anthropic.MessageNewParamsServiceTierStandardOnly,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}
	m, err := client.Messages.New(sdkCtx(t), p)
	if err != nil || m.Usage.ServiceTier != anthropic.UsageServiceTierStandard {
		t.Fatalf("%v, usage.service_tier %q", err, m.Usage.ServiceTier)
	}
	p.ServiceTier = "priority"
	_, err = client.Messages.New(sdkCtx(t), p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Fatalf("unknown tier: %v, want a 400", err)
	}
}

// TestGenAISDKTiers: google.golang.org/genai sends config.serviceTier; a
// priority request over its limit (tier_downgrade) is answered with
// x-gemini-service-tier: standard, which the SDK's response headers keep,
// and a flex request meets the flex 503.
func TestGenAISDKTiers(t *testing.T) {
	s, url, _ := sdkSim(t)
	ctx := sdkCtx(t)
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: FakeKey, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini/", RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)}}})
	if err != nil {
		t.Fatal(err)
	}
	gen := func(tier genai.ServiceTier) (*genai.GenerateContentResponse, error) {
		return client.Models.GenerateContent(ctx, "gemini-3.8-flash", genai.Text("hello there"), &genai.GenerateContentConfig{ServiceTier: tier})
	}
	r, err := gen(genai.ServiceTierPriority)
	if err != nil || r.SDKHTTPResponse == nil || r.SDKHTTPResponse.Headers.Get("x-gemini-service-tier") != "priority" {
		t.Fatalf("priority: %v %+v", err, r)
	}
	if err := s.Inject(Fault{Provider: "gemini", Kind: FaultTierDowngrade}); err != nil {
		t.Fatal(err)
	}
	if r, err = gen(genai.ServiceTierPriority); err != nil || r.SDKHTTPResponse.Headers.Get("x-gemini-service-tier") != "standard" {
		t.Fatalf("downgraded priority: %v %+v", err, r)
	}
	if err := s.Inject(Fault{Provider: "gemini", Kind: FaultFlexCapacity}); err != nil {
		t.Fatal(err)
	}
	_, err = gen(genai.ServiceTierFlex)
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != 503 || ae.Status != "UNAVAILABLE" {
		t.Fatalf("flex: %v, want 503 UNAVAILABLE", err)
	}
}

// TestBedrockSDKTiers: aws-sdk-go-v2's ConverseStream sends serviceTier
// {type}; the metadata event names the tier that served it (the default
// one after a tier_downgrade of a priority request).
func TestBedrockSDKTiers(t *testing.T) {
	b := newBedrockSDKSim(t, false)
	c := b.client(simCreds, "us-east-1")
	for _, tc := range []struct {
		fault bool
		want  types.ServiceTierType
	}{{false, types.ServiceTierTypePriority}, {true, types.ServiceTierTypeDefault}} {
		if tc.fault {
			if err := b.s.Inject(Fault{Provider: "bedrock", Kind: FaultTierDowngrade}); err != nil {
				t.Fatal(err)
			}
		}
		in := converseInput()
		in.ServiceTier = &types.ServiceTier{Type: types.ServiceTierTypePriority}
		out, err := c.ConverseStream(sdkCtx(t), in)
		if err != nil {
			t.Fatal(err)
		}
		es := out.GetStream()
		var served types.ServiceTierType
		for ev := range es.Events() {
			if m, ok := ev.(*types.ConverseStreamOutputMemberMetadata); ok && m.Value.ServiceTier != nil {
				served = m.Value.ServiceTier.Type
			}
		}
		es.Close()
		if es.Err() != nil || served != tc.want {
			t.Fatalf("downgrade %v: %v, served %q, want %q", tc.fault, es.Err(), served, tc.want)
		}
	}
}

// TestGroqFlexCapacity: Groq's 498 capacity_exceeded (its body assumed) is
// the answer to a flex request when flex capacity is short, and its plain
// overload is a 503.
func TestGroqFlexCapacity(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	for _, tc := range []struct {
		kind, tier string
		status     int
		want       string
	}{
		{FaultFlexCapacity, "flex", 498, "capacity_exceeded"},
		{FaultFlexCapacity, "auto", 498, "capacity_exceeded"},
		{FaultOverload, "flex", 503, "Service Unavailable"},
	} {
		if err := s.Inject(Fault{Provider: "groq", Kind: tc.kind}); err != nil {
			t.Fatal(err)
		}
		req := request(t, ts.URL, "groq", false)
		req.Body = io.NopCloser(strings.NewReader(`{"model":"llama-3.3-70b-versatile","service_tier":"` + tc.tier + `","messages":[{"role":"user","content":"hi"}]}`))
		req.ContentLength = -1
		if r := mustDo(t, ts, req); r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s at %s: %d %s", tc.kind, tc.tier, r.status, r.body)
		}
	}
	// An on_demand request is not hit by the flex fault left armed.
	if err := s.Inject(Fault{Provider: "groq", Kind: FaultFlexCapacity}); err != nil {
		t.Fatal(err)
	}
	req := request(t, ts.URL, "groq", false)
	req.Body = io.NopCloser(strings.NewReader(`{"model":"llama-3.3-70b-versatile","service_tier":"on_demand","messages":[{"role":"user","content":"hi"}]}`))
	req.ContentLength = -1
	if r := mustDo(t, ts, req); r.status != http.StatusOK {
		t.Errorf("on_demand met the flex fault: %d %s", r.status, r.body)
	}
}

// TestTierRoundTrip drives every provider's tiers through the stream
// client: the tier is taken, the served tier read back where the provider
// names it, a tier_downgrade of a premium request seen as a downgrade, and
// a flex_capacity fault classed flex_capacity where the provider has flex.
func TestTierRoundTrip(t *testing.T) {
	for _, c := range []struct {
		target         string
		served, downTo string // "": the provider names none
		flex           bool
	}{
		{"openai/gpt-5.4-mini+priority", "priority", "default", true},
		{"openai:responses/gpt-5.4-mini+priority", "priority", "default", true},
		{"anthropic/claude-sonnet-4-5+auto", "standard", "", false},
		{"gemini/gemini-2.5-flash+priority", "priority", "standard", true},
		{"gemini:interactions/gemini-2.5-flash+priority", "priority", "standard", true},
		{"groq/llama-3.3-70b-versatile+on_demand", "", "", true},
		{"bedrock/anthropic.claude-haiku-5-5-v1:0+priority", "priority", "default", false},
	} {
		t.Run(c.target, func(t *testing.T) {
			s, ts, _ := newTestSim(t, Options{})
			tg, err := stream.ParseTarget(c.target)
			if err != nil {
				t.Fatal(err)
			}
			do := func(tg stream.Target) stream.Result {
				ep := stream.Endpoint{Provider: tg.Provider, BaseURL: BaseURL(ts.URL, tg.Provider), Key: stream.Secret(FakeKey)}
				return (&stream.Client{}).Do(sdkCtx(t), ep, stream.Request{Target: tg, Prompt: "hello there", MaxTokens: 64}, nil)
			}
			if r := do(tg); r.Err != nil || r.ServedTier != c.served || tg.Downgraded(r.ServedTier) {
				t.Fatalf("served %q (%v), want %q", r.ServedTier, r.Err, c.served)
			}
			base, _, _ := strings.Cut(tg.Provider, ":")
			if c.downTo != "" {
				if err := s.Inject(Fault{Provider: base, Kind: FaultTierDowngrade}); err != nil {
					t.Fatal(err)
				}
				if r := do(tg); r.Err != nil || r.ServedTier != c.downTo || !tg.Downgraded(r.ServedTier) {
					t.Fatalf("downgrade: served %q (%v), want %q", r.ServedTier, r.Err, c.downTo)
				}
			}
			if c.flex {
				if err := s.Inject(Fault{Provider: base, Kind: FaultFlexCapacity}); err != nil {
					t.Fatal(err)
				}
				fx := tg
				fx.Tier = "flex"
				if r := do(fx); r.Err == nil || r.Err.Class != stream.ClassFlexCapacity {
					t.Fatalf("flex: %v, want flex_capacity", r.Err)
				}
			}
		})
	}
}

// TestAnthropicPriorityCapacity: an account with Priority Tier capacity
// (priority_itpm, priority_otpm) serves an auto request (or one asking
// nothing) at priority, and the answer names the priority windows in the
// anthropic-priority-* headers, which the stream client reads as their own
// windows; standard_only, or a request over the priority windows, is
// served at standard without them. The SDK reads usage.service_tier.
func TestAnthropicPriorityCapacity(t *testing.T) {
	path := scenarioFile(t, "name = prio\n[anthropic]\npriority_itpm = 400000\npriority_otpm = 1500\n")
	_, ts, _ := newTestSim(t, Options{ScenarioFile: path})
	do := func(target string, maxTok int) stream.Result {
		tg, err := stream.ParseTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		ep := stream.Endpoint{Provider: tg.Provider, BaseURL: BaseURL(ts.URL, tg.Provider), Key: stream.Secret(FakeKey)}
		return (&stream.Client{}).Do(sdkCtx(t), ep, stream.Request{Target: tg, Prompt: "hello there", MaxTokens: maxTok}, nil)
	}
	r := do("anthropic/claude-sonnet-4-5+auto", 64)
	if r.Err != nil || r.ServedTier != "priority" || r.Limits == nil {
		t.Fatalf("auto: served %q, limits %v (%v)", r.ServedTier, r.Limits, r.Err)
	}
	pin, pout := r.Limits.PriorityInputTokens, r.Limits.PriorityOutputTokens
	if pin == nil || pout == nil || pin.Limit != 400000 || pout.Limit != 1500 || !pin.Rounded || pin.Reset.IsZero() {
		t.Fatalf("priority windows: %+v %+v", pin, pout)
	}
	if pin.Remaining != 400000 || pout.Remaining != 1000 {
		t.Errorf("priority remaining: in %d (a few tokens round to the limit), out %d (1500 less a few, rounded)", pin.Remaining, pout.Remaining)
	}
	if r.Limits.InputTokens == nil || r.Limits.InputTokens.Limit == pin.Limit {
		t.Errorf("the regular input window: %+v", r.Limits.InputTokens)
	}
	if r := do("anthropic/claude-sonnet-4-5", 64); r.ServedTier != "priority" || r.Limits == nil || r.Limits.PriorityInputTokens == nil {
		t.Errorf("no tier asked: served %q (%v)", r.ServedTier, r.Err)
	}
	for _, c := range []struct {
		target string
		maxTok int
	}{{"anthropic/claude-sonnet-4-5+standard_only", 64}, {"anthropic/claude-sonnet-4-5+auto", 4000}} {
		r := do(c.target, c.maxTok)
		if r.Err != nil || r.ServedTier != "standard" || r.Limits == nil || r.Limits.PriorityInputTokens != nil || r.Limits.PriorityOutputTokens != nil {
			t.Errorf("%s max %d: served %q, limits %+v (%v)", c.target, c.maxTok, r.ServedTier, r.Limits, r.Err)
		}
	}
	client := anthropic.NewClient(aoption.WithBaseURL(BaseURL(ts.URL, "anthropic")), aoption.WithAPIKey(FakeKey), aoption.WithMaxRetries(0))
	var resp *http.Response
	m, err := client.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64, ServiceTier: anthropic.MessageNewParamsServiceTierAuto,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}, aoption.WithResponseInto(&resp))
	if err != nil || m.Usage.ServiceTier != anthropic.UsageServiceTierPriority || resp.Header.Get("anthropic-priority-input-tokens-limit") != "400000" {
		t.Fatalf("sdk: %v, usage.service_tier %q", err, m.Usage.ServiceTier)
	}
}
