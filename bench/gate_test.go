package bench

import (
	"bytes"
	"strings"
	"testing"
)

// gateRun is a result with our kernels of the given runs, by name.
func gateRun(kernels map[string][]float64) *Result {
	r := &Result{Schema: Schema, Meta: Meta{Impl: Ours, Date: "d", Backend: "cuda", Device: "gpu", Shapes: "llama8b", DType: "bf16"}}
	for name, runs := range kernels {
		r.Kernels = append(r.Kernels, kernel(name, Ours, Compute, runs...))
	}
	return r
}

func TestGate(t *testing.T) {
	base := gateRun(map[string][]float64{
		"steady":  {1.00, 1.01, 0.99},
		"slower":  {1.00, 1.00, 1.00},
		"noisy":   {1.00, 1.20, 0.90},
		"faster":  {1.00, 1.00, 1.00},
		"removed": {1.00, 1.00, 1.00},
	})
	// A cuBLAS kernel of the same name is not ours: never gated.
	base.Kernels = append(base.Kernels, kernel("slower", CuBLASLt, Compute, 0.1, 0.1, 0.1))
	cur := gateRun(map[string][]float64{
		"steady": {1.02, 1.03, 1.01}, // +2%: within 5%
		"slower": {1.10, 1.09, 1.11}, // +10%: fails
		"noisy":  {1.15, 1.00, 1.25}, // +15% but its runs spread 30%: passes, gate raised
		"faster": {0.50, 0.50, 0.50},
		"new":    {1, 1, 1},
	})
	cur.Kernels = append(cur.Kernels, kernel("slower", CuBLASLt, Compute, 1, 1, 1))
	g := Gate(base, cur, 0.05)
	if f := g.Failed(); len(f) != 1 || f[0] != "slower" {
		t.Errorf("failed %v, want [slower]", f)
	}
	lines := map[string]GateLine{}
	for _, l := range g.Lines {
		lines[l.Name] = l
	}
	if l := lines["noisy"]; !l.Raised || l.Failed || l.Threshold < 0.29 {
		t.Errorf("noisy kernel: %+v; want a threshold raised to its spread and a pass", l)
	}
	if l := lines["steady"]; l.Raised || l.Failed || l.Threshold != 0.05 {
		t.Errorf("steady kernel: %+v; want a pass at 5%%", l)
	}
	if len(g.Missing) != 1 || g.Missing[0] != "removed" || len(g.Added) != 1 || g.Added[0] != "new" {
		t.Errorf("missing %v, added %v", g.Missing, g.Added)
	}
	if g.NoiseFloor <= 0 {
		t.Errorf("noise floor %v, want the median spread of the kernels", g.NoiseFloor)
	}
	var out bytes.Buffer
	g.Write(&out)
	for _, want := range []string{"noise floor", "SLOWER", "1 of 4 kernels got slower: slower", "↑", "removed", "new"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestGateWithinNoisePasses(t *testing.T) {
	base := gateRun(map[string][]float64{"a": {1.00, 1.02, 0.98}, "b": {2.00, 2.01, 1.99}})
	cur := gateRun(map[string][]float64{"a": {1.03, 1.01, 1.04}, "b": {1.98, 2.00, 2.02}})
	g := Gate(base, cur, 0.05)
	if f := g.Failed(); len(f) != 0 {
		t.Errorf("failed %v, want none", f)
	}
	var out bytes.Buffer
	g.Write(&out)
	if !strings.Contains(out.String(), "all 2 kernels within the allowed slowdown") {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestGateErrorAndMismatch(t *testing.T) {
	base := gateRun(map[string][]float64{"a": {1, 1, 1}})
	cur := gateRun(nil)
	cur.Meta.Device = "another gpu"
	cur.Kernels = []Kernel{{Name: "a", Impl: Ours, Bound: Compute, Error: "launch failed"}}
	g := Gate(base, cur, 0.05)
	if f := g.Failed(); len(f) != 1 || f[0] != "a" {
		t.Errorf("a kernel that now fails to run: failed %v", f)
	}
	if len(g.Warnings) != 1 || !strings.Contains(g.Warnings[0], "device") {
		t.Errorf("warnings %v, want one about the device", g.Warnings)
	}
}

func TestCombine(t *testing.T) {
	k := kernel("a", Ours, Compute, 1.1, 1.2, 1.1)
	again := kernel("a", Ours, Compute, 1.0, 1.0, 1.0)
	k.Combine(&again)
	if len(k.Runs) != 6 || k.Median != 1.05 {
		t.Errorf("combined runs %v median %v, want 6 runs and median 1.05", k.Runs, k.Median)
	}
}

func TestParseFraction(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{{"5%", 0.05, true}, {"0.05", 0.05, true}, {" 12.5% ", 0.125, true}, {"0", 0, true},
		{"-1%", 0, false}, {"five", 0, false}, {"%", 0, false}, {"NaN", 0, false}} {
		got, err := ParseFraction(c.in)
		if (err == nil) != c.ok || (c.ok && (got < c.want-1e-12 || got > c.want+1e-12)) {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		runs []float64
		want float64
	}{
		{[]float64{1, 1, 1}, 0},
		{[]float64{1, 1.2, 0.9}, 0.3},
		// Five or more: the single slowest and fastest are left out.
		{[]float64{1, 1.1, 0.9, 5, 0.1}, 0.2},
	} {
		if got := Spread(c.runs); got < c.want-1e-12 || got > c.want+1e-12 {
			t.Errorf("Spread(%v) = %v, want %v", c.runs, got, c.want)
		}
	}
}
