package tui

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

func TestRunNeedsARunner(t *testing.T) {
	if err := Run(context.Background(), Options{}); err == nil {
		t.Fatal("Run without a runner did not fail")
	}
}

func runWith(t *testing.T, ctx context.Context, input string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- runProgram(ctx, Options{Runner: &fakeRunner{clock: &fakeClock{t: t0}}},
			tea.WithInput(strings.NewReader(input)), tea.WithOutput(io.Discard), tea.WithWindowSize(120, 40))
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end")
		return nil
	}
}

func TestRunEndsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runWith(t, ctx, ""); err != nil {
		t.Errorf("Run with an ended context = %v, want nil", err)
	}
	// tab leaves the input, q quits: status 0.
	if err := runWith(t, context.Background(), "\tq"); err != nil {
		t.Errorf("Run quit by q = %v, want nil", err)
	}
}
