package sim

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/limitscope/limitscope/stream"
)

// hintOK: the simulator's not-found message names both fixes.
func hintOK(msg, model string) bool {
	return strings.Contains(msg, "models = "+model) && strings.Contains(msg, AnyModelSwitch)
}

// TestSDKUnknownModel: a model outside the catalogue gets each SDK's
// not-found error, with one request (no retry), before any stream; the
// message names the fix.
func TestSDKUnknownModel(t *testing.T) {
	t.Run("openai-go", func(t *testing.T) {
		t.Parallel()
		_, url, count := sdkSim(t)
		c := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey))
		for _, streamed := range []bool{false, true} {
			before := count()
			p := openai.ChatCompletionNewParams{Model: "gpt-no-such-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			var err error
			if streamed {
				st := c.Chat.Completions.NewStreaming(sdkCtx(t), p)
				for st.Next() {
					t.Error("a chunk for an unknown model")
				}
				err = st.Err()
			} else {
				_, err = c.Chat.Completions.New(sdkCtx(t), p)
			}
			var e *openai.Error
			if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" || !hintOK(e.Message, "gpt-no-such-model") {
				t.Errorf("stream %v: %T %v, want a 404 model_not_found naming the fix", streamed, err, err)
			}
			if n := count() - before; n != 1 {
				t.Errorf("stream %v: %d requests, want 1", streamed, n)
			}
		}
		// The Responses API, the same account: the same answer.
		before := count()
		_, err := c.Responses.New(sdkCtx(t), responsesParams("gpt-no-such-model"))
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" || count()-before != 1 {
			t.Errorf("responses: %v, %d requests", err, count()-before)
		}
	})
	t.Run("anthropic-sdk-go", func(t *testing.T) {
		t.Parallel()
		_, url, count := sdkSim(t)
		c := anthropic.NewClient(aoption.WithBaseURL(url+"/anthropic"), aoption.WithAPIKey(FakeKey))
		_, err := c.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: "claude-no-such-model", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != 404 || !strings.Contains(e.RawJSON(), `"not_found_error"`) || !hintOK(e.RawJSON(), "claude-no-such-model") || !strings.Contains(e.RawJSON(), `"request_id":"req_`) {
			t.Errorf("%T %v, want a 404 not_found_error naming the fix", err, err)
		}
		if count() != 1 {
			t.Errorf("%d requests, want 1", count())
		}
	})
	t.Run("genai", func(t *testing.T) {
		t.Parallel()
		_, url, count := sdkSim(t)
		c, err := genai.NewClient(sdkCtx(t), &genai.ClientConfig{APIKey: FakeKey, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Models.GenerateContent(sdkCtx(t), "gemini-no-such-model", genai.Text("hi"), nil)
		var e genai.APIError
		if !errors.As(err, &e) || e.Code != 404 || e.Status != "NOT_FOUND" || !hintOK(e.Message, "gemini-no-such-model") {
			t.Errorf("%T %v, want a 404 NOT_FOUND naming the fix", err, err)
		}
		if count() != 1 {
			t.Errorf("%d requests, want 1", count())
		}
	})
	t.Run("bedrockruntime", func(t *testing.T) {
		t.Parallel()
		b := newBedrockSDKSim(t, false)
		in := converseInput()
		in.ModelId = aws.String("anthropic.no-such-model-v1:0")
		_, err := b.client(simCreds, "us-east-1").ConverseStream(sdkCtx(t), in)
		var e *types.ResourceNotFoundException
		if !errors.As(err, &e) || !hintOK(e.ErrorMessage(), "anthropic.no-such-model-v1:0") {
			t.Errorf("%T %v, want ResourceNotFoundException naming the fix", err, err)
		}
		// Inference profiles and their ARNs name catalogued models.
		for _, id := range []string{"us.anthropic.claude-haiku-5-5-v1:0", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-haiku-5-5-v1:0"} {
			in.ModelId = aws.String(id)
			out, err := b.client(simCreds, "us-east-1").ConverseStream(sdkCtx(t), in)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if text, _, _, err := drain(out); err != nil || text == "" {
				t.Errorf("%s: %q %v", id, text, err)
			}
		}
	})
}

func responsesParams(model string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
}

// regexpAll is every match of expr in s that is not the tail of a longer
// name (after ".": a Bedrock id's).
func regexpAll(re *regexp.Regexp, s string) []string {
	var out []string
	for _, ix := range re.FindAllStringIndex(s, -1) {
		if ix[0] > 0 && s[ix[0]-1] == '.' {
			continue
		}
		out = append(out, s[ix[0]:ix[1]])
	}
	return out
}

// TestSDKModelsList: models.list, models.retrieve and token counting answer
// from the catalogue, as each SDK reads them.
func TestSDKModelsList(t *testing.T) {
	ids := func(p string) map[string]bool {
		m := map[string]bool{}
		for _, x := range catalogue[p] {
			m[x.ID] = true
		}
		return m
	}
	t.Run("openai-go", func(t *testing.T) {
		t.Parallel()
		_, url, _ := sdkSim(t)
		c := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey))
		want := ids("openai")
		got := 0
		iter := c.Models.ListAutoPaging(sdkCtx(t))
		for iter.Next() {
			if !want[iter.Current().ID] {
				t.Errorf("listed %q", iter.Current().ID)
			}
			got++
		}
		if iter.Err() != nil || got != len(want) {
			t.Errorf("listed %d of %d: %v", got, len(want), iter.Err())
		}
		m, err := c.Models.Get(sdkCtx(t), "gpt-5.4-mini")
		if err != nil || m.ID != "gpt-5.4-mini" || m.Created == 0 {
			t.Errorf("get: %+v %v", m, err)
		}
		_, err = c.Models.Get(sdkCtx(t), "gpt-no-such-model")
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" {
			t.Errorf("get unknown: %v", err)
		}
	})
	t.Run("anthropic-sdk-go", func(t *testing.T) {
		t.Parallel()
		_, url, _ := sdkSim(t)
		c := anthropic.NewClient(aoption.WithBaseURL(url+"/anthropic"), aoption.WithAPIKey(FakeKey))
		want := ids("anthropic")
		got := 0
		iter := c.Models.ListAutoPaging(sdkCtx(t), anthropic.ModelListParams{})
		for iter.Next() {
			if !want[iter.Current().ID] || iter.Current().DisplayName == "" {
				t.Errorf("listed %+v", iter.Current())
			}
			got++
		}
		if iter.Err() != nil || got != len(want) {
			t.Errorf("listed %d of %d: %v", got, len(want), iter.Err())
		}
		if m, err := c.Models.Get(sdkCtx(t), "claude-haiku-5-5", anthropic.ModelGetParams{}); err != nil || m.ID != "claude-haiku-5-5" {
			t.Errorf("get: %v", err)
		}
		n, err := c.Messages.CountTokens(sdkCtx(t), anthropic.MessageCountTokensParams{Model: "claude-haiku-5-5",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("word ", 100)))}})
		if err != nil || n.InputTokens < 100 {
			t.Errorf("count_tokens: %+v %v", n, err)
		}
		_, err = c.Messages.CountTokens(sdkCtx(t), anthropic.MessageCountTokensParams{Model: "claude-no-such-model",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != 404 {
			t.Errorf("count_tokens unknown model: %v", err)
		}
	})
	t.Run("genai", func(t *testing.T) {
		t.Parallel()
		_, url, _ := sdkSim(t)
		c, err := genai.NewClient(sdkCtx(t), &genai.ClientConfig{APIKey: FakeKey, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini"}})
		if err != nil {
			t.Fatal(err)
		}
		want := ids("gemini")
		got := 0
		for m, err := range c.Models.All(sdkCtx(t)) {
			if err != nil {
				t.Fatal(err)
			}
			if !want[strings.TrimPrefix(m.Name, "models/")] || m.InputTokenLimit == 0 {
				t.Errorf("listed %+v", m)
			}
			got++
		}
		if got != len(want) {
			t.Errorf("listed %d of %d", got, len(want))
		}
		if m, err := c.Models.Get(sdkCtx(t), "gemini-2.5-flash", nil); err != nil || m.Name != "models/gemini-2.5-flash" {
			t.Errorf("get: %+v %v", m, err)
		}
		n, err := c.Models.CountTokens(sdkCtx(t), "gemini-2.5-flash", genai.Text(strings.Repeat("word ", 100)), nil)
		if err != nil || n.TotalTokens < 100 {
			t.Errorf("countTokens: %+v %v", n, err)
		}
		_, err = c.Models.CountTokens(sdkCtx(t), "gemini-no-such-model", genai.Text("hi"), nil)
		var e genai.APIError
		if !errors.As(err, &e) || e.Code != 404 {
			t.Errorf("countTokens unknown model: %v", err)
		}
	})
}

// bannerEnv sets exactly the environment the sim banner prints (and
// clears every other AWS variable), as a user pasting it would have.
func bannerEnv(t *testing.T, r *Running) {
	t.Helper()
	for _, k := range []string{"AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, line := range r.Env() {
		k, v, _ := strings.Cut(line, "=")
		t.Setenv(k, v)
	}
}

// TestBedrockRuntimeWithTheBannersVariables: aws-sdk-go-v2's bedrockruntime,
// configured only by the environment the banner prints, streams an answer
// (SigV4 with the simulated keys over plain HTTP, which it allows; it
// refuses a Bedrock API key there, so the banner prints none).
func TestBedrockRuntimeWithTheBannersVariables(t *testing.T) {
	r, err := Start(t.Context(), "", Options{TokensPerSecond: 1e9, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bannerEnv(t, r)
	env := strings.Join(r.Env(), "\n")
	if strings.Contains(env, "AWS_BEARER_TOKEN_BEDROCK") || !strings.Contains(env, "AWS_ACCESS_KEY_ID="+FakeAWSAccessKeyID) {
		t.Fatalf("the banner's Bedrock lines:\n%s", env)
	}
	cfg, err := config.LoadDefaultConfig(sdkCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// The client the environment configured, with the body copy ownBody
	// explains (the SDK's own race with a server that answers at once).
	cfg.HTTPClient = ownBodyClient{cfg.HTTPClient}
	c := bedrockruntime.NewFromConfig(cfg)
	out, err := c.ConverseStream(sdkCtx(t), converseInput())
	if err != nil {
		t.Fatalf("ConverseStream with the banner's variables: %v", err)
	}
	text, stop, usage, err := drain(out)
	if err != nil || text == "" || stop != "end_turn" || usage == nil {
		t.Errorf("stream: %q %q %v %v", text, stop, usage, err)
	}
	conv, err := c.Converse(sdkCtx(t), &bedrockruntime.ConverseInput{ModelId: aws.String(bedrockModel),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}}})
	if err != nil || conv.Output == nil {
		t.Errorf("Converse: %v", err)
	}
}

// h2cClient speaks HTTP/2 without TLS with prior knowledge (no Upgrade), as
// the AWS SDK for JavaScript does to an http:// endpoint; proto records the
// protocol of each response.
func h2cClient(proto *[]string) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil {
			*proto = append(*proto, resp.Proto)
		}
		return resp, err
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestH2CPriorKnowledgeStreamsBedrock: a Go HTTP/2 client with prior
// knowledge streams a Bedrock answer (SigV4 and the event stream) from the
// listener that also serves HTTP/1.1; a cut over HTTP/2 is an error, never
// a clean end.
func TestH2CPriorKnowledgeStreamsBedrock(t *testing.T) {
	r, err := Start(t.Context(), "", Options{TokensPerSecond: 1e9, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var protos []string
	c := &stream.Client{HTTP: h2cClient(&protos)}
	ep := stream.Endpoint{Provider: "bedrock", BaseURL: r.BaseURL("bedrock"), AWS: FakeAWSAuth()}
	req := stream.Request{Target: stream.Target{Provider: "bedrock", Model: "us-east-1/" + bedrockModel}, Prompt: "hi"}
	res := c.Do(sdkCtx(t), ep, req, nil)
	if res.Err != nil || res.Text == "" || res.FinishReason == "" {
		t.Fatalf("h2c: %+v", res)
	}
	if err := r.Server.Inject(Fault{Provider: "bedrock", Kind: FaultCut}); err != nil {
		t.Fatal(err)
	}
	if res := c.Do(sdkCtx(t), ep, req, nil); res.Err == nil {
		t.Errorf("a cut over HTTP/2 succeeded: %+v", res)
	}
	if len(protos) != 2 || protos[0] != "HTTP/2.0" || protos[1] != "HTTP/2.0" {
		t.Errorf("protocols %v, want HTTP/2.0 twice", protos)
	}
	// HTTP/1.1 on the same listener.
	resp, err := http.Get(r.URL + "/_sim/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != 200 {
		t.Errorf("HTTP/1.1: %s %d", resp.Proto, resp.StatusCode)
	}
}

// TestScenarioModels: a scenario file's models lines add to one provider's
// catalogue (answered, listed); misplaced or malformed ones are errors
// naming the line; AnyModel accepts every name.
func TestScenarioModels(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ft.ini")
	if err := os.WriteFile(file, []byte("name = ft\n[openai]\nmodels = ft:gpt-5.4-mini:acme:1, my-model\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, ts, _ := newTestSim(t, Options{ScenarioFile: file})
	post := func(model string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/openai/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+FakeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b, c := post("my-model"), post("ft:gpt-5.4-mini:acme:1"), post("gpt-other"); a != 200 || b != 200 || c != 404 {
		t.Errorf("statuses %d %d %d, want 200 200 404", a, b, c)
	}
	var listed []string
	for _, pm := range s.Models() {
		for _, m := range pm.Models {
			if m.Added {
				listed = append(listed, pm.Provider+"/"+m.ID)
			}
		}
	}
	if strings.Join(listed, " ") != "openai/ft:gpt-5.4-mini:acme:1 openai/my-model" {
		t.Errorf("added models listed: %v", listed)
	}
	// Back on a preset, the file's models are unknown again.
	if err := s.SetScenario("calm"); err != nil || post("my-model") != 404 {
		t.Errorf("calm still knows the file's model (%v)", err)
	}

	for _, tc := range []struct{ text, want string }{
		{"[*]\nmodels = x\n", "x.ini:2: models: a model is one provider's"},
		{"[openai]\nmodels = claude-haiku-5-5\n", `x.ini:2: models: "claude-haiku-5-5" is a anthropic model`},
		{"[openai]\nmodels = bad\x1bname\n", `x.ini:2: models: "bad\x1bname" is not a model name`},
		{"[gemini]\nmodels =\n", "x.ini:2: models: no model named"},
		{"models = gpt-x\n", `x.ini:1: "models" is a provider setting`},
	} {
		_, err := parseScenario("x", strings.NewReader(tc.text), "x.ini")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}

	any, err := New(Options{AnyModel: true, TokensPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/anthropic/v1/messages", strings.NewReader(`{"model":"claude-anything","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", FakeKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	any.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("AnyModel: %d %s", rec.Code, rec.Body)
	}
}

// FuzzScenarioModels: a models line never panics, and what it accepts is
// what the provider then knows.
func FuzzScenarioModels(f *testing.F) {
	for _, s := range []string{"gpt-x", "a, b c", "ft:gpt-5.4-mini:org::abc", "claude-haiku-5-5", "", ",,", "x\x00y", strings.Repeat("m", 201)} {
		f.Add("openai", s)
		f.Add("bedrock", s)
	}
	f.Fuzz(func(t *testing.T, provider, value string) {
		if !knownProvider(provider) || strings.ContainsAny(value, "\r\n") {
			return
		}
		sc, err := parseScenario("f", strings.NewReader("["+provider+"]\nmodels = "+value+"\n"), "f.ini")
		if err != nil {
			return
		}
		for _, m := range sc.Providers[provider].Models {
			if !modelNameRE.MatchString(m) {
				t.Errorf("accepted %q", m)
			}
		}
	})
}

// TestAdminRefusesForeignHostAndOrigin: a DNS-rebinding Host or a page on
// another origin gets 403 and arms nothing; loopback names and the
// simulator's own origin pass.
func TestAdminRefusesForeignHostAndOrigin(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, host, origin string) int {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"provider":"openai","kind":"overload"}`)
		}
		req := httptest.NewRequest(method, "/_sim/fault", body)
		if method == http.MethodGet {
			req = httptest.NewRequest(method, "/_sim/status", nil)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		method, host, origin string
		status               int
	}{
		{"POST", "evil.example:8787", "", 403},
		{"GET", "rebind.attacker.example:8787", "", 403},
		{"POST", "192.168.1.5:8787", "", 403},
		{"POST", "127.0.0.1:8787", "http://evil.example", 403},
		{"POST", "127.0.0.1:8787", "null", 403},
		{"POST", "127.0.0.1:8787", "http://localhost:3000", 403},
		{"GET", "localhost:8787", "https://evil.example", 403},
	} {
		if got := do(tc.method, tc.host, tc.origin); got != tc.status {
			t.Errorf("%s Host %s Origin %q: %d, want %d", tc.method, tc.host, tc.origin, got, tc.status)
		}
	}
	if n := len(s.Armed()); n != 0 {
		t.Fatalf("%d faults armed by refused requests", n)
	}
	for _, tc := range []struct{ method, host, origin string }{
		{"POST", "127.0.0.1:8787", ""}, {"POST", "localhost:8787", "http://localhost:8787"},
		{"GET", "[::1]:8787", ""}, {"GET", "sim.localhost", ""},
	} {
		if got := do(tc.method, tc.host, tc.origin); got != 200 {
			t.Errorf("%s Host %s Origin %q: %d, want 200", tc.method, tc.host, tc.origin, got)
		}
	}
	if n := len(s.Armed()); n != 2 {
		t.Errorf("%d faults armed, want 2", n)
	}
}

// TestScenarioNameSanitized: a scenario file's name and description lose
// their escape sequences and control characters before anything prints
// them (the banner, sim --list, send --sim, the status).
func TestScenarioNameSanitized(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "evil.ini")
	text := "name = demo\x1b]0;owned\x07\x1b[2J-day\ndescription = tight\x1b[31m limits\x9b\r\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{ScenarioFile: file})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if s.Scenario() != "demo-day" || st.Scenario != "demo-day" {
		t.Errorf("name %q", s.Scenario())
	}
	if s.file.Description != "tight limits" {
		t.Errorf("description %q", s.file.Description)
	}
	// A file name with an escape in it names the scenario safely too.
	bad := filepath.Join(dir, "x\x1b[31my.ini")
	if err := os.WriteFile(bad, []byte("description = d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Options{ScenarioFile: bad})
	if err != nil || strings.ContainsAny(s2.Scenario(), "\x1b") {
		t.Errorf("file-named scenario %q (%v)", s2.Scenario(), err)
	}
}

// TestSmallerDifferences: the OpenAI 404 names the method used, the
// Anthropic route 404 carries its request id (as the header), Gemini's
// answers say nothing of rate-limit headers it does not send.
func TestSmallerDifferences(t *testing.T) {
	s, err := New(Options{TokensPerSecond: 1e9, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/openai/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer "+FakeKey)
	s.ServeHTTP(rec, req)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "Invalid URL (GET /v1/chat/completions)") {
		t.Errorf("openai GET: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/anthropic/v1/nothing", strings.NewReader("{}")))
	id := rec.Header().Get("request-id")
	if rec.Code != 404 || id == "" || !strings.Contains(rec.Body.String(), `"request_id":"`+id+`"`) {
		t.Errorf("anthropic route 404: %d %q %s", rec.Code, id, rec.Body)
	}
	for i := range 50 {
		req := &simRequest{provider: "gemini", model: "gemini-2.5-flash", prompt: "hi"}
		s.SetSeed(int64(i + 1))
		pieces, _ := s.answerText(req)
		text := strings.Join(pieces, "")
		if strings.Contains(text, "header") {
			t.Fatalf("a Gemini answer speaks of headers: %s", text)
		}
		req.provider = "openai"
		pieces, _ = s.answerText(req)
		if strings.Contains(strings.Join(pieces, ""), "header") {
			return // OpenAI's may: it sends them
		}
	}
	t.Error("no OpenAI answer in 50 mentions headers: the test tests nothing")
}

// TestCatalogueHoldsEveryModelNamed: every model named in limitscope's
// docs, tests, scenarios and fixtures is in its provider's catalogue,
// except the names written to be unknown.
func TestCatalogueHoldsEveryModelNamed(t *testing.T) {
	shapes := []struct {
		provider string
		re       string
	}{
		{"openai", `\bgpt-[0-9][a-z0-9.\-]*[a-z0-9]|\bo[134](?:-mini)?\b`},
		{"anthropic", `\bclaude-(?:haiku|sonnet|opus|[0-9])[a-z0-9\-]*[a-z0-9]`},
		{"gemini", `\bgemini-[0-9][a-z0-9.\-]*[a-z0-9]`},
		{"groq", `\bllama-?[0-9][a-z0-9.\-]*[a-z0-9]|\bmeta-llama/llama-[a-z0-9.\-]*[a-z0-9]`},
		{"deepseek", `\bdeepseek-(?:chat|reasoner)\b`},
		{"mistral", `\b(?:mistral|codestral)-(?:small|medium|large|latest)[a-z0-9\-]*[a-z0-9]`},
		{"xai", `\bgrok-[0-9][a-z0-9.\-]*[a-z0-9]`},
		{"bedrock", `\b(?:(?:us|eu|apac|global)\.)?(?:anthropic|amazon|meta)\.(?:claude|nova|llama)[a-z0-9.\-]*[a-z0-9](?::[0-9]+)?`},
	}
	// A literal each shape's names hold, to skip files without any.
	hints := [][]string{{"gpt-"}, {"claude-"}, {"gemini-"}, {"llama"}, {"deepseek-"}, {"stral-"}, {"grok-"}, {"anthropic.", "amazon.", "meta."}}
	oModel := regexp.MustCompile(`\bo[134]\b`)
	res := make([]*regexp.Regexp, len(shapes))
	for i, sh := range shapes {
		res[i] = regexp.MustCompile(sh.re)
	}
	// Names written to be unknown, and pieces of prose or paths that have
	// a model's shape.
	unknown := map[string]bool{"gpt-9": true, "gpt-x-2026": true, "gpt-6-astra": true, "gpt-5.4-mini-2026": true, "gpt-4o-2024": true,
		"llama-3": true, "claude-3-7": true, "gpt-oss-20b-1": true,
		// test names of packages that send them to no simulator
		"o4": true, "llama-3.3-70b": true,
		// a real model left out of the catalogue on purpose (differences_test.go)
		"gpt-4.1-nano": true}
	root := filepath.Join("..")
	checked := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".ini", ".json", ".sse", ".txt", ".jsonl":
		default:
			return nil
		}
		if filepath.Base(path) == "catalogue_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, sh := range shapes {
			if !slices.ContainsFunc(hints[i], func(h string) bool { return strings.Contains(string(b), h) }) && (i != 0 || !oModel.MatchString(string(b))) {
				continue
			}
			for _, m := range regexpAll(res[i], string(b)) {
				if unknown[m] || strings.Contains(m, "no-such") || checked[sh.provider+"/"+m] {
					continue
				}
				checked[sh.provider+"/"+m] = true
				if !catalogueHas(sh.provider, m) && catalogueOwner(m) == "" {
					t.Errorf("%s: %s model %q is not in the catalogue", path, sh.provider, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(checked) < 40 {
		t.Errorf("only %d model names found: the scan reads too little", len(checked))
	}
	// Each provider's default model is catalogued.
	for _, p := range providerNames {
		info, _ := stream.Provider(p)
		if !catalogueHas(p, info.DefaultModel) {
			t.Errorf("%s: default model %q not catalogued", p, info.DefaultModel)
		}
	}
}

// TestSigV4SignatureMatchesTheSDKs: the hand-made canonical request (used
// for HTTP/2 clients, which sign :authority in place of host) gives the
// AWS SDK signer's signature for a request the SDK signed, query, escaped
// path and all; a wrong secret gives another.
func TestSigV4SignatureMatchesTheSDKs(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8787/bedrock/model/anthropic.claude-haiku-5-5-v1%3A0/converse?b=2&a=x%20y&a=1", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amz-User-Agent", "  aws-sdk   x ")
	creds, _ := simCreds.Retrieve(t.Context())
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, sha256Hex("{}"), "bedrock", "us-east-1", t0); err != nil {
		t.Fatal(err)
	}
	sig, ok := parseSigV4(req.Header.Get("Authorization"))
	if !ok {
		t.Fatal(req.Header.Get("Authorization"))
	}
	if got := sigV4Signature(req, sig, []byte("{}"), FakeAWSSecretAccessKey); got != sig.signature {
		t.Errorf("hand-made %s, the SDK's %s", got, sig.signature)
	}
	if got := sigV4Signature(req, sig, []byte("{}"), "another-secret"); got == sig.signature {
		t.Error("another secret, the same signature")
	}
	if got := sigV4Signature(req, sig, []byte("{ }"), FakeAWSSecretAccessKey); got == sig.signature {
		t.Error("another body, the same signature")
	}
}

// TestUnknownModelEveryDialect: every provider and API answers an unknown
// model with its documented not-found (status, code), before the limits
// count it, naming the fix.
func TestUnknownModelEveryDialect(t *testing.T) {
	s, err := New(Options{TokensPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		path, body, auth string
		status           int
		code             string
	}{
		{"/openai/v1/chat/completions", chat, "Bearer", 404, `"code":"model_not_found"`},
		{"/openai/v1/responses", `{"model":"no-such-model","input":"hi"}`, "Bearer", 404, `"code":"model_not_found"`},
		{"/groq/openai/v1/chat/completions", chat, "Bearer", 404, `"code":"model_not_found"`},
		{"/deepseek/chat/completions", chat, "Bearer", 400, `"Model Not Exist`},
		{"/mistral/v1/chat/completions", chat, "Bearer", 400, `"type":"invalid_model"`},
		{"/xai/v1/chat/completions", chat, "Bearer", 404, `"code":"Some requested entity was not found"`},
		{"/gemini/v1beta/models/no-such-model:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "goog", 404, `"status":"NOT_FOUND"`},
		{"/gemini/v1beta/interactions", `{"model":"no-such-model","input":"hi","stream":true}`, "goog", 404, `"code":"model_not_found"`},
	} {
		req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
		if tc.auth == "goog" {
			req.Header.Set("x-goog-api-key", FakeKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+FakeKey)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.code) || !hintOK(rec.Body.String(), "no-such-model") {
			t.Errorf("%s: %d %s, want %d %s with the hint", tc.path, rec.Code, rec.Body, tc.status, tc.code)
		}
	}
	for _, p := range s.Status().Providers {
		if p.Requests != 0 {
			t.Errorf("%s counted %d requests", p.Provider, p.Requests)
		}
	}
}
