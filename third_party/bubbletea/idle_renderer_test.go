package tea

import (
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countingRenderer counts the renderer loop's flushes.
type countingRenderer struct {
	nilRenderer
	flushes atomic.Int64
}

func (r *countingRenderer) flush(bool) error { r.flushes.Add(1); return nil }

// TestIdleRendererSleeps (limitscope's patch): the renderer's loop ticks
// only while frames may be pending. With nothing rendered for a minute it
// flushes at most twice; a view wakes it for a frame, and it sleeps again.
func TestIdleRendererSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewProgram(nil, WithOutput(io.Discard), WithInput(nil), WithFPS(60))
		if p.fps < 1 {
			p.fps = 60
		}
		r := &countingRenderer{}
		p.renderer = r
		p.startRenderer()
		defer p.stopRenderer(true)

		time.Sleep(time.Minute)
		synctest.Wait()
		if n := r.flushes.Load(); n > 2 {
			t.Fatalf("an idle renderer flushed %d times in a minute, want at most 2", n)
		}
		before := r.flushes.Load()
		p.wakeRenderer()
		time.Sleep(time.Second / 60)
		synctest.Wait()
		if r.flushes.Load() == before {
			t.Fatal("a wake did not bring a frame within one frame time")
		}
		before = r.flushes.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := r.flushes.Load() - before; n > 2 {
			t.Fatalf("after one frame the renderer flushed %d more times in a minute, want at most 2", n)
		}
		// A burst of wakes is one frame a tick, not one flush a wake.
		before = r.flushes.Load()
		for range 100 {
			p.wakeRenderer()
		}
		time.Sleep(time.Second / 60)
		synctest.Wait()
		if n := r.flushes.Load() - before; n < 1 || n > 2 {
			t.Fatalf("100 wakes in one frame gave %d flushes, want 1 or 2", n)
		}
	})
}
