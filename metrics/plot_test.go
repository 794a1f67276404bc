package metrics

import (
	"math"
	"testing"
)

func TestAxis(t *testing.T) {
	tests := []struct {
		lo, hi         float64
		wantLo, wantHi float64
		wantStep       float64
	}{
		{0, 500, 0, 500, 100},
		{1.83, 10.2, 0, 12, 2},
		{0, 3e-4, 0, 3e-4, 1e-4},
		{5, 5, 4.4, 5.6, 0.2},
		{0, 0, -1, 1, 0.5},
	}
	for _, tc := range tests {
		a := newAxis(tc.lo, tc.hi, 5)
		if !near(a.lo, tc.wantLo) || !near(a.hi, tc.wantHi) || !near(a.step, tc.wantStep) {
			t.Errorf("newAxis(%v, %v) = %+v; want [%v, %v] by %v", tc.lo, tc.hi, a, tc.wantLo, tc.wantHi, tc.wantStep)
		}
		ts := a.ticks()
		if len(ts) < 2 || !near(ts[0], a.lo) || !near(ts[len(ts)-1], a.hi) {
			t.Errorf("ticks of %+v: %v", a, ts)
		}
	}
	a := newAxis(0, 3e-4, 5)
	if got := a.label(1e-4); got != "0.0001" {
		t.Errorf("label(1e-4) = %q", got)
	}
	if got := newAxis(0, 2e-6, 4).label(1e-6); got != "1e-06" {
		t.Errorf("label(1e-6) = %q", got)
	}
}

// near reports whether a and b agree to a relative 1e-9.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b), 1e-300) }
