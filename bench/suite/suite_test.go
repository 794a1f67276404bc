package suite

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/target"
)

// sane reports what is wrong with a figure that must be positive and finite.
func sane(t *testing.T, what string, x float64) {
	t.Helper()
	if !(x > 0) || math.IsInf(x, 0) || math.IsNaN(x) {
		t.Errorf("%s = %v, want positive and finite", what, x)
	}
}

// checkResult checks that every figure of r is measured, positive and
// finite, and that r survives a round trip through its file.
func checkResult(t *testing.T, r *bench.Result, wantKernels bool) {
	t.Helper()
	if wantKernels && len(r.Kernels) == 0 {
		t.Fatal("no kernels measured")
	}
	for _, k := range r.Kernels {
		if k.Error != "" {
			t.Errorf("%s: %s", k.Name, k.Error)
			continue
		}
		sane(t, k.Name+" median", k.Median)
		if k.Bound == bench.Compute {
			sane(t, k.Name+" TFLOP/s", k.TFLOPs)
		} else {
			sane(t, k.Name+" GB/s", k.GBs)
		}
		if r.Ceilings.Copy != nil && k.Bound == bench.Memory {
			sane(t, k.Name+" % of the copy ceiling", k.PctCeiling)
		}
	}
	if r.Ceilings.Copy == nil {
		t.Error("no copy ceiling")
	} else {
		sane(t, "copy ceiling GB/s", r.Ceilings.Copy.GBs)
	}
	for _, s := range r.Steps {
		if s.Error != "" {
			t.Errorf("%s: %s", s.Name, s.Error)
			continue
		}
		sane(t, s.Name+" tokens/s", s.TokensPerS)
		sane(t, s.Name+" FLOPs per token", s.FLOPsPerToken)
		sane(t, s.Name+" peak bytes", float64(s.PeakBytes))
	}
	for _, g := range r.Generation {
		if g.Error != "" {
			t.Errorf("%s: %s", g.Name, g.Error)
			continue
		}
		sane(t, g.Name+" tokens/s", g.TokensPerS)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Read(path); err != nil {
		t.Fatal(err)
	}
}

// quick are settings that run every case once per repetition.
func quick(backend string) Options {
	return Options{Backend: backend, Small: true, Reps: 2, MinTime: time.Nanosecond, Steps: 1, Threads: 2}
}

func TestCPUSmall(t *testing.T) {
	tg, err := target.Open(target.Options{Backend: "cpu", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(tg, quick("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, true)
	if r.Meta.Backend != "cpu" || r.Meta.Shapes != "small" || r.Meta.Device == "" || r.Meta.Date == "" {
		t.Errorf("meta %+v", r.Meta)
	}
	if r.Ceilings.GEMM == nil {
		t.Error("no GEMM ceiling on the CPU (OpenBLAS)")
	}
	// Every op of the small shape set, and both step settings at both lengths.
	for _, want := range []string{"gemm/small/q/fwd/f32/", "attention/fwd/f32/b2xT32/H4/G2/D32", "adamw/small/f32", "sample_top_p/small/f32", "sample_top_k/small/f32", "attention/decode/"} {
		found := false
		for _, k := range r.Kernels {
			found = found || strings.HasPrefix(k.Name, want)
		}
		if !found {
			t.Errorf("no kernel %s…", want)
		}
	}
	if len(r.Steps) != 4 || len(r.Generation) != 4 {
		t.Errorf("%d steps and %d generation phases, want 4 and 4", len(r.Steps), len(r.Generation))
	}
	// Each step and decoding phase profiled op by op, on the host's clock.
	for _, s := range r.Steps {
		if p := s.Profile; p == nil || len(p.Ops) == 0 || p.DeviceS <= 0 || p.DeviceS > p.WallS {
			t.Errorf("%s: profile %+v", s.Name, p)
		}
	}
	for _, g := range r.Generation {
		if p := g.Profile; (g.Phase == "decode") != (p != nil && len(p.Ops) > 0) {
			t.Errorf("%s (%s): profile %+v", g.Name, g.Phase, p)
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		backend, shapes, model string
		small                  bool
	}{
		{"cuda", "llama8b", "llama-3.1-8b", false},
		{"cuda", "small", "tiny", true},
		{"cudaemu", "small", "tiny", false},
		{"cpu", "ref24m", "tiny", false},
	} {
		o := Defaults(Options{Small: c.small}, c.backend)
		if o.Shapes != c.shapes || o.Model != c.model || o.Reps == 0 || len(o.SeqLens) == 0 {
			t.Errorf("%s small=%v: %+v", c.backend, c.small, o)
		}
	}
	o := Defaults(Options{Shapes: "small", Reps: 9, SeqLens: []int{5}}, "cuda")
	if o.Shapes != "small" || o.Reps != 9 || len(o.SeqLens) != 1 {
		t.Errorf("set fields were overridden: %+v", o)
	}
}
