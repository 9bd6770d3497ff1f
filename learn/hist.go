package learn

import "math"

// hist is a histogram of positive values in log-spaced buckets 2% wide, so
// a quantile read back is within 1% of the value, in a fixed 8 KiB
// whatever the number of samples.
type hist struct {
	n      int
	counts [histBuckets]int32
}

const (
	histBuckets = 2048
	histMin     = 1e-4 // below: the first bucket
	histStep    = 1.02
)

var logStep = math.Log(histStep)

func (h *hist) add(v float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		return
	}
	i := 0
	if v > histMin {
		i = min(histBuckets-1, int(math.Log(v/histMin)/logStep))
	}
	if h.counts[i] < math.MaxInt32 {
		h.counts[i]++
		h.n++
	}
}

// quantile returns the value at level q (0..1): the middle of its bucket.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := int(math.Ceil(q * float64(h.n)))
	want = max(1, min(h.n, want))
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen >= want {
			return histMin * math.Pow(histStep, float64(i)+0.5)
		}
	}
	return 0
}
