package metrics

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// point is one finite value of a series.
type point struct{ x, y float64 }

// plotSeries is one curve: a metric's finite values in file order.
type plotSeries struct {
	key, label, color string
	markers           bool
	pts               []point
}

// Image geometry, in SVG user units (pixels).
const (
	plotWidth   = 900
	plotLeft    = 90
	plotRight   = 860
	lossTop     = 70
	lossBottom  = 400
	lrTop       = 470
	lrBottom    = 600
	heightWith  = 660 // with the learning-rate panel
	heightAlone = 460 // without it
)

// PlotSVG renders recs as a standalone SVG document titled title: a loss
// panel (the training loss, and the evaluation loss where recorded) and,
// when the records hold learning rates, a learning-rate panel below it
// sharing the step axis. Non-finite values are left out; records without
// any finite loss are an error.
func PlotSVG(recs []Record, title string) ([]byte, error) {
	if len(recs) == 0 {
		return nil, errors.New("no records: the metrics file is empty")
	}
	loss := &plotSeries{key: Loss, label: "training loss", color: "#1f77b4"}
	eval := &plotSeries{key: EvalLoss, label: "eval loss", color: "#d62728", markers: true}
	lr := &plotSeries{key: LR, label: "learning rate", color: "#2ca02c"}
	for _, r := range recs {
		for _, s := range []*plotSeries{loss, eval, lr} {
			if v, ok := r.Get(s.key); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				s.pts = append(s.pts, point{float64(r.Step), v})
			}
		}
	}
	if len(loss.pts)+len(eval.pts) == 0 {
		return nil, fmt.Errorf("no finite %q or %q values in %d records", Loss, EvalLoss, len(recs))
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range []*plotSeries{loss, eval, lr} {
		for _, p := range s.pts {
			xmin, xmax = min(xmin, p.x), max(xmax, p.x)
		}
	}
	xAxis := newAxis(xmin, xmax, 8)
	xAxis.lo = max(xAxis.lo, 0) // steps are never negative

	height := heightAlone
	if len(lr.pts) > 0 {
		height = heightWith
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, plotWidth, height, plotWidth, height)
	text(&b, plotWidth/2, 30, "middle", `font-size="18" font-weight="bold"`, title)

	lossPanel := panel{top: lossTop, bottom: lossBottom, x: xAxis, y: newAxis(seriesRange(loss, eval)), ylabel: "loss"}
	lossPanel.draw(&b, len(lr.pts) == 0)
	lossPanel.curve(&b, loss)
	lossPanel.curve(&b, eval)
	legend(&b, []*plotSeries{loss, eval})
	if len(lr.pts) > 0 {
		lrPanel := panel{top: lrTop, bottom: lrBottom, x: xAxis, y: newAxis(seriesRange(lr)), ylabel: "learning rate"}
		lrPanel.y.lo = max(lrPanel.y.lo, 0)
		lrPanel.draw(&b, true)
		lrPanel.curve(&b, lr)
		legendAt(&b, []*plotSeries{lr}, lrTop+10)
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// seriesRange returns the range of the values of ss, lo = hi = 0 when they
// have none.
func seriesRange(ss ...*plotSeries) (lo, hi float64, ticks int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.pts {
			lo, hi = min(lo, p.y), max(hi, p.y)
		}
	}
	if lo > hi {
		return 0, 0, 5
	}
	return lo, hi, 5
}

// axis is a linear scale with round tick marks.
type axis struct {
	lo, hi, step float64
}

// newAxis returns an axis covering [lo, hi] with about n ticks at round
// values (1, 2 or 5 times a power of ten).
func newAxis(lo, hi float64, n int) axis {
	if hi <= lo {
		d := math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, step: step}
}

// ticks returns the tick values of a.
func (a axis) ticks() []float64 {
	var ts []float64
	for i := math.Ceil(a.lo/a.step - 1e-9); ; i++ {
		v := i * a.step
		if v > a.hi+a.step*1e-9 {
			return ts
		}
		ts = append(ts, v)
	}
}

// label formats a tick value with as many digits as the tick step needs.
func (a axis) label(v float64) string {
	if math.Abs(v) < a.step*1e-9 {
		return "0"
	}
	if av := math.Abs(v); av >= 1e-3 && av < 1e6 {
		digits := max(0, -int(math.Floor(math.Log10(a.step)+1e-9)))
		return strconv.FormatFloat(v, 'f', digits, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// panel is one plotting area: its vertical extent on the image and its
// axes.
type panel struct {
	top, bottom float64
	x, y        axis
	ylabel      string
	logY        bool // y holds decades: log10 of the values
}

func (p panel) px(x float64) float64 {
	return plotLeft + (x-p.x.lo)/(p.x.hi-p.x.lo)*(plotRight-plotLeft)
}

// py returns the image row of value y.
func (p panel) py(y float64) float64 {
	if p.logY {
		y = math.Log10(y)
	}
	return p.pa(y)
}

// pa returns the image row of a position on the y axis (a decade on a
// logarithmic one).
func (p panel) pa(a float64) float64 {
	return p.bottom - (a-p.y.lo)/(p.y.hi-p.y.lo)*(p.bottom-p.top)
}

// ylabel formats a y tick: a power of ten on a logarithmic axis.
func (p panel) ytick(t float64) string {
	if p.logY {
		return strconv.FormatFloat(math.Pow(10, t), 'g', -1, 64)
	}
	return p.y.label(t)
}

// draw draws the panel's frame, grid, ticks and labels; the step label
// goes under the panel when xlabel is set.
func (p panel) draw(b *bytes.Buffer, xlabel bool) {
	fmt.Fprintf(b, "<g class=\"axes\" stroke=\"#ddd\" stroke-width=\"1\">\n")
	for _, t := range p.x.ticks() {
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p.px(t), p.top, p.px(t), p.bottom)
	}
	for _, t := range p.y.ticks() {
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", plotLeft, p.pa(t), plotRight, p.pa(t))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n",
		plotLeft, p.top, plotRight-plotLeft, p.bottom-p.top)
	for _, t := range p.x.ticks() {
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", p.px(t), p.bottom, p.px(t), p.bottom+5)
		text(b, p.px(t), p.bottom+18, "middle", "", p.x.label(t))
	}
	for _, t := range p.y.ticks() {
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\"/>\n", plotLeft-5, p.pa(t), plotLeft, p.pa(t))
		text(b, plotLeft-8, p.pa(t)+4, "end", "", p.ytick(t))
	}
	mid := (p.top + p.bottom) / 2
	text(b, 20, mid, "middle", fmt.Sprintf(`transform="rotate(-90 20 %.1f)"`, mid), p.ylabel)
	if xlabel {
		text(b, (plotLeft+plotRight)/2, p.bottom+40, "middle", "", "step")
	}
}

// curve draws s as a polyline, with a dot at each point when s asks for
// markers or has a single point.
func (p panel) curve(b *bytes.Buffer, s *plotSeries) {
	if len(s.pts) == 0 {
		return
	}
	fmt.Fprintf(b, "<g class=\"series\" id=\"%s\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"", s.key, s.color)
	for i, pt := range s.pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(b, "%.2f,%.2f", p.px(pt.x), p.py(pt.y))
	}
	b.WriteString("\"/>\n")
	if s.markers || len(s.pts) == 1 {
		for _, pt := range s.pts {
			fmt.Fprintf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", p.px(pt.x), p.py(pt.y), s.color)
		}
	}
	b.WriteString("</g>\n")
}

// legend draws the legend of the series that have points in the top right
// corner of the loss panel.
func legend(b *bytes.Buffer, ss []*plotSeries) { legendAt(b, ss, lossTop+10) }

func legendAt(b *bytes.Buffer, ss []*plotSeries, top float64) {
	var shown []*plotSeries
	for _, s := range ss {
		if len(s.pts) > 0 {
			shown = append(shown, s)
		}
	}
	if len(shown) == 0 {
		return
	}
	const w = 140
	x := float64(plotRight - 10 - w)
	fmt.Fprintf(b, "<g class=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
		x, top, w, 8+18*len(shown))
	for i, s := range shown {
		y := top + 16 + 18*float64(i)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", x+8, y-4, x+32, y-4, s.color)
		text(b, x+40, y, "start", "", s.label)
	}
	b.WriteString("</g>\n")
}

// text writes a text element with its content escaped; extra holds more
// attributes, already formatted.
func text(b *bytes.Buffer, x, y float64, anchor, extra, s string) {
	fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s>", x, y, anchor, extra)
	xml.EscapeText(b, []byte(s))
	b.WriteString("</text>\n")
}
