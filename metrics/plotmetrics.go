package metrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
)

// PlotOptions control PlotMetricsSVG.
type PlotOptions struct {
	// Keys are the metrics to draw, a panel each, top to bottom.
	Keys []string
	// LogY draws every panel's values on a logarithmic axis with a tick
	// at each power of ten; values that are not positive are left out.
	LogY bool
}

// Panel geometry of PlotMetricsSVG, in SVG user units.
const (
	metricTop    = 60  // the first panel's top
	metricHeight = 180 // one panel's height
	metricGap    = 40  // between panels
)

// palette colours the panels' curves in turn.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

// PlotMetricsSVG renders the metrics o.Keys of recs against the step as a
// standalone SVG document titled title, one panel per metric sharing the
// step axis, on linear or (o.LogY) logarithmic value axes. Values that
// are not finite, or not positive on a logarithmic axis, are left out; a
// metric with no value left is an error naming it. Without Keys it draws
// what PlotSVG draws (the loss and the learning rate), or, with LogY, the
// loss alone.
func PlotMetricsSVG(recs []Record, title string, o PlotOptions) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("no records: the metrics file is empty")
	}
	if len(o.Keys) == 0 && !o.LogY {
		return PlotSVG(recs, title)
	}
	if len(o.Keys) == 0 {
		o.Keys = []string{Loss}
	}
	series := make([]*plotSeries, len(o.Keys))
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for i, k := range o.Keys {
		s := &plotSeries{key: k, label: k, color: palette[i%len(palette)]}
		for _, r := range recs {
			v, ok := r.Get(k)
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) || (o.LogY && v <= 0) {
				continue
			}
			s.pts = append(s.pts, point{float64(r.Step), v})
			xmin, xmax = min(xmin, float64(r.Step)), max(xmax, float64(r.Step))
		}
		if len(s.pts) == 0 {
			what := "finite"
			if o.LogY {
				what = "positive finite"
			}
			return nil, fmt.Errorf("no %s %q values in %d records (the file has %s)", what, k, len(recs), strings.Join(recordKeys(recs), ", "))
		}
		series[i] = s
	}
	xAxis := newAxis(xmin, xmax, 8)
	xAxis.lo = max(xAxis.lo, 0)
	height := metricTop + len(series)*(metricHeight+metricGap) + 20
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, plotWidth, height, plotWidth, height)
	text(&b, plotWidth/2, 30, "middle", `font-size="18" font-weight="bold"`, title)
	for i, s := range series {
		top := float64(metricTop + i*(metricHeight+metricGap))
		p := panel{top: top, bottom: top + metricHeight, x: xAxis, ylabel: s.key, logY: o.LogY}
		if o.LogY {
			p.y = logAxis(s)
		} else {
			p.y = newAxis(seriesRange(s))
		}
		p.draw(&b, i == len(series)-1)
		p.curve(&b, s)
		legendAt(&b, []*plotSeries{s}, top+10)
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// logAxis returns an axis over the decades of s's (positive) values: from
// the power of ten at or below the least to the one at or above the most,
// a tick at every decade, or every few when they are many.
func logAxis(s *plotSeries) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range s.pts {
		lo, hi = min(lo, math.Log10(p.y)), max(hi, math.Log10(p.y))
	}
	lo, hi = math.Floor(lo+1e-9), math.Ceil(hi-1e-9)
	if hi <= lo {
		hi = lo + 1
	}
	return axis{lo: lo, hi: hi, step: math.Ceil((hi - lo) / 8)}
}

// recordKeys returns the keys the records hold, sorted.
func recordKeys(recs []Record) []string {
	seen := map[string]bool{}
	var keys []string
	for _, r := range recs {
		for k := range r.Values {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
