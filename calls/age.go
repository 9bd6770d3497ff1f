package calls

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseAge reads an age: Go durations plus d (days) and w (weeks), e.g.
// "12h", "30d", "1w". Negative ages are refused.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v < 0 || v > 1e5 {
				return 0, fmt.Errorf("bad age %q: want e.g. 2h, 3d, 1w", s)
			}
			return time.Duration(v * float64(u.unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad age %q: want e.g. 2h, 3d, 1w", s)
	}
	return d, nil
}
