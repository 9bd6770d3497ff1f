package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestInMemoryStreamsInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(time.Second)
			}
		})
		hc, stop := InMemory(h)
		defer stop()
		start := time.Now()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				resp, err := hc.Get("http://sim.invalid/x")
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if string(b) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
					t.Errorf("body %q", b)
				}
			})
		}
		wg.Wait()
		if el := time.Since(start); el != 3*time.Second {
			t.Fatalf("20 concurrent 3 s streams took %s of virtual time, want 3s", el)
		}
	})
}
