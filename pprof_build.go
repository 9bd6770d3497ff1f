//go:build pprof

package main

// Built only with -tags pprof: serves net/http/pprof on the loopback address
// in LIMITSCOPE_PPROF (for example 127.0.0.1:6061), to profile the real
// binary as a user runs it (go tool pprof http://ADDR/debug/pprof/profile).

import (
	"fmt"
	"net/http"
	_ "net/http/pprof" // the profiling handlers, on http.DefaultServeMux
	"os"
)

func init() {
	addr := os.Getenv("LIMITSCOPE_PPROF")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			fmt.Fprintln(os.Stderr, "pprof:", err)
		}
	}()
}
