package retry

import (
	"math"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// TestEstimateRateFixedWindow: a fixed window (all of the limit back at its
// reset) with one request spent and 60 s left is not a refill of one
// request a minute; a continuous bucket's estimate is unchanged.
func TestEstimateRateFixedWindow(t *testing.T) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		w    stream.Window
		want float64
	}{
		{"fixed window, 1 of 500 spent, 60s left", stream.Window{Limit: 500, Remaining: 499, Reset: at.Add(60 * time.Second), HasLimit: true, HasRemaining: true}, 500.0 / 60},
		{"bucket, 60 RPM, 59 left, full in 1s", stream.Window{Limit: 60, Remaining: 59, Reset: at.Add(time.Second), HasLimit: true, HasRemaining: true}, 1},
		{"bucket, 60 RPM, empty, full in 60s", stream.Window{Limit: 60, Remaining: 0, Reset: at.Add(time.Minute), HasLimit: true, HasRemaining: true}, 1},
		// A bucket holding less than the limit (300 RPM with a burst of 5,
		// as Anthropic enforces per-minute limits over shorter intervals)
		// is full again within a second or two: (limit-remaining)/reset
		// would read 300 a second.
		{"300 RPM, burst 5, empty, Anthropic's reset rounded up to 2s", stream.Window{Limit: 300, Remaining: 0, Reset: at.Add(2 * time.Second), HasLimit: true, HasRemaining: true}, 5},
		{"300 RPM, burst 5, empty, full in 1s", stream.Window{Limit: 300, Remaining: 0, Reset: at.Add(time.Second), HasLimit: true, HasRemaining: true}, 5},
		{"300 RPM, burst 5, 3 left, full in 400ms", stream.Window{Limit: 300, Remaining: 3, Reset: at.Add(400 * time.Millisecond), HasLimit: true, HasRemaining: true}, 5},
		{"a longer window: 1000 a day, 10 spent", stream.Window{Limit: 1000, Remaining: 990, Reset: at.Add(10 * time.Hour), HasLimit: true, HasRemaining: true}, 1000.0 / 36000},
	}
	for _, tc := range cases {
		got := estimateRate(&tc.w, at, time.Minute)
		if math.Abs(got-tc.want) > tc.want*0.01 {
			t.Errorf("%s: rate %.4g/s, want %.4g/s", tc.name, got, tc.want)
		}
	}
}
