// Package proxy is limitscope's local OpenAI- and Anthropic-compatible
// endpoint. An application's SDK points at it (OPENAI_BASE_URL=
// http://127.0.0.1:4000/v1, ANTHROPIC_BASE_URL=http://127.0.0.1:4000) and
// every call goes through the retry core: the request is read from the
// caller's dialect, routed by its model (provider/model, or an alias with a
// fallback chain and policy), sent by the engine to whichever provider
// serves it, and the answer (text, usage, streaming included) or the error
// is written back in the caller's dialect.
//
// The proxy never parses a provider's wire format: the upstream side is
// retry -> stream. Callers present the proxy's token, never a provider key.
package proxy
