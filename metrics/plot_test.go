package metrics

import (
	"math"
	"strings"
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

func TestPlotMetricsLogY(t *testing.T) {
	var recs []Record
	for s := int64(1); s <= 10; s++ {
		recs = append(recs, Record{Step: s, Values: map[string]float64{
			Loss: 5 / float64(s*s), TokensPerS: 1000 + float64(s), "kl": 0}})
	}
	svg, err := PlotMetricsSVG(recs, "run", PlotOptions{Keys: []string{Loss, TokensPerS}, LogY: true})
	if err != nil {
		t.Fatal(err)
	}
	out := string(svg)
	// The loss runs from 0.05 to 5: decades 0.01 … 10; tokens/s 1001 … 1010: 1000 … 10000.
	for _, tick := range []string{">0.01</text>", ">0.1</text>", ">1</text>", ">10</text>", ">1000</text>", ">10000</text>", `id="loss"`, `id="tokens_per_s"`} {
		if !strings.Contains(out, tick) {
			t.Errorf("the SVG lacks %s", tick)
		}
	}
	if strings.Contains(out, ">0.5</text>") {
		t.Error("a logarithmic axis has a linear tick 0.5")
	}
	// A metric with no positive value cannot go on a log axis; an unknown one is named.
	for _, key := range []string{"kl", "nope"} {
		if _, err := PlotMetricsSVG(recs, "run", PlotOptions{Keys: []string{key}, LogY: true}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("plotting %q on a log axis: error %v, want one naming it", key, err)
		}
	}
	// Linear: the tokens/s axis has round linear ticks.
	svg, err = PlotMetricsSVG(recs, "run", PlotOptions{Keys: []string{TokensPerS}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), ">1010</text>") {
		t.Error("linear tokens/s axis lacks the tick 1010")
	}
}
