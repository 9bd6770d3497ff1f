// Package sim simulates the providers' documented behaviour as one
// http.Handler: each provider under /{provider}/ with its real paths, auth
// checks, SSE formats, rate-limit headers, error bodies and mid-stream
// failures, driven by named scenarios and live fault injection under /_sim/.
package sim
