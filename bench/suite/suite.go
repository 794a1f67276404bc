// Package suite is train bench: it opens a target, measures the ceilings,
// the kernels and the whole-model steps with the defaults that suit the
// backend, and assembles one bench.Result; and it re-measures a baseline's
// kernels for the regression gate.
package suite

import (
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/kernelbench"
	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/bench/stepbench"
	"github.com/turnwise/turnwise/bench/target"
	"github.com/turnwise/turnwise/engine"
)

// Options are train bench's settings. Zero values mean the default for the
// backend (see Defaults).
type Options struct {
	Backend string // cpu or cuda
	Device  int    // GPU ordinal
	Threads int    // CPU threads (0: one per CPU)
	Suite   string // kernels, step or all
	Small   bool   // the small shapes and the tiny model, whatever the backend

	Shapes  string // opbench.ShapeSets name
	DType   string // f32 or bf16
	Reps    int
	MinTime time.Duration
	Filter  string // regular expression over kernel names

	Model     string // llama preset of the step suite
	SeqLens   []int
	LoRARank  int
	Steps     int
	GenBatch  []int
	Prompt    int
	NewTokens int

	Log io.Writer // progress (nil: silent)
}

// Defaults fills the unset fields of o for a backend that is a real GPU
// ("cuda"), the emulator ("cudaemu") or the CPU: Llama-3.1-8B's shapes and
// model on a GPU; on the emulator (whose times mean nothing) shapes small
// enough to run in seconds and the tiny model; on the CPU the 24.4M
// reference model's shapes and the tiny model. With o.Small, the shapes and
// model are the emulator's whatever the backend.
func Defaults(o Options, backend string) Options {
	d := backendDefaults(backend)
	if o.Small {
		e := backendDefaults("cudaemu")
		d.Shapes, d.Model, d.SeqLens, d.LoRARank = e.Shapes, e.Model, e.SeqLens, e.LoRARank
		d.GenBatch, d.Prompt, d.NewTokens = e.GenBatch, e.Prompt, e.NewTokens
	}
	str := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	num := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	str(&o.Suite, d.Suite)
	str(&o.Shapes, d.Shapes)
	str(&o.DType, d.DType)
	str(&o.Model, d.Model)
	num(&o.Reps, d.Reps)
	num(&o.Steps, d.Steps)
	num(&o.Prompt, d.Prompt)
	num(&o.NewTokens, d.NewTokens)
	num(&o.LoRARank, d.LoRARank)
	if o.MinTime == 0 {
		o.MinTime = d.MinTime
	}
	if o.SeqLens == nil {
		o.SeqLens = d.SeqLens
	}
	if o.GenBatch == nil {
		o.GenBatch = d.GenBatch
	}
	return o
}

// backendDefaults are the settings Defaults fills in for one backend.
func backendDefaults(backend string) Options {
	switch backend {
	case "cuda":
		return Options{Suite: "all", Shapes: "llama8b", DType: "bf16", Reps: 7, MinTime: 20 * time.Millisecond,
			Model: "llama-3.1-8b", SeqLens: []int{2048, 8192}, LoRARank: 16, Steps: 3,
			GenBatch: []int{1, 16}, Prompt: 512, NewTokens: 64}
	case "cudaemu":
		return Options{Suite: "all", Shapes: "small", DType: "bf16", Reps: 3,
			Model: "tiny", SeqLens: []int{32, 64}, LoRARank: 4, Steps: 2,
			GenBatch: []int{1, 4}, Prompt: 16, NewTokens: 4}
	}
	return Options{Suite: "all", Shapes: "ref24m", DType: "f32", Reps: 5, MinTime: 50 * time.Millisecond,
		Model: "tiny", SeqLens: []int{64, 128}, LoRARank: 4, Steps: 3,
		GenBatch: []int{1, 4}, Prompt: 32, NewTokens: 8}
}

// Measure measures o's suites on an open target.
func Measure(t *target.Target, o Options) (*bench.Result, error) {
	return measure(t, o, nil, true)
}

// measure is Measure; keep (nil: all) further selects kernels by name, and
// withVendor adds the vendor's GEMMs and the ceilings.
func measure(t *target.Target, o Options, keep func(string) bool, withVendor bool) (*bench.Result, error) {
	o = Defaults(o, t.Backend.Name())
	if o.Suite != "kernels" && o.Suite != "step" && o.Suite != "all" {
		return nil, fmt.Errorf("unknown suite %q (want kernels, step or all)", o.Suite)
	}
	shapes, ok := opbench.ShapeSets[o.Shapes]
	if !ok {
		return nil, fmt.Errorf("unknown shape set %q (want llama8b, ref24m or small)", o.Shapes)
	}
	dt, err := engine.ParseDType(o.DType)
	if err != nil || (dt != engine.F32 && dt != engine.BF16) {
		return nil, fmt.Errorf("dtype %q: want f32 or bf16", o.DType)
	}
	if o.Reps < 1 {
		return nil, fmt.Errorf("%d repetitions: want at least 1", o.Reps)
	}
	ko := kernelbench.Options{Shapes: shapes, DType: dt, Reps: o.Reps, MinTime: o.MinTime, Log: o.Log}
	if o.Filter != "" {
		re, err := regexp.Compile(o.Filter)
		if err != nil {
			return nil, fmt.Errorf("filter: %w", err)
		}
		ko.Keep = re.MatchString
	}
	if keep != nil {
		ko.Keep = keep
	}
	ko.NoVendor = !withVendor

	r := &bench.Result{Schema: bench.Schema, Meta: meta(t, o)}
	if withVendor {
		gemmSize, copyBytes := ceilingSizes(t, o.Shapes)
		var notes []string
		r.Ceilings, notes = kernelbench.Ceilings(t, gemmSize, copyBytes, ko)
		r.Meta.Notes = append(r.Meta.Notes, notes...)
	}
	if o.Suite != "step" {
		r.Kernels = kernelbench.Run(t, r.Ceilings, ko)
	}
	if o.Suite != "kernels" {
		so := stepbench.Options{Model: o.Model, DType: dt, LoRARank: o.LoRARank, SeqLens: o.SeqLens,
			Recompute: []bool{false, true}, Steps: o.Steps, GenBatch: o.GenBatch, Prompt: o.Prompt,
			NewTokens: o.NewTokens, GenReps: max(1, min(o.Reps, 3)), Log: o.Log, Seed: 1}
		r.Steps, r.Generation, err = stepbench.Run(t.Backend, t.MemInfo, mfuPeak(t, r.Ceilings), so)
		if err != nil {
			return nil, err
		}
		gemm := bench.ShortGEMM(t.GEMMName)
		for i := range r.Steps {
			r.Steps[i].GEMM = gemm
		}
		for i := range r.Generation {
			r.Generation[i].GEMM = gemm
		}
	}
	return r, nil
}

func meta(t *target.Target, o Options) bench.Meta {
	m := bench.NewMeta()
	m.Backend, m.Device, m.Driver, m.Toolkit = t.Backend.Name(), t.Device, t.Driver, t.Toolkit
	m.GEMM = t.GEMMName
	m.L2Bytes, m.MemoryBytes, m.Threads, m.Timer = t.CacheBytes, t.MemoryBytes, t.Threads, t.TimerName
	m.Shapes, m.DType, m.Reps = o.Shapes, o.DType, o.Reps
	m.Notes = append(m.Notes, t.Notes...)
	if t.Vendor == nil && t.VendorNote != "" {
		m.Notes = append(m.Notes, "no vendor GEMM beside ours: "+t.VendorNote)
	}
	return m
}

// ceilingSizes are the square GEMM and the copy the ceilings are measured
// with: large enough to reach the device's peak, small enough to be quick
// on the emulator.
func ceilingSizes(t *target.Target, shapes string) (gemm, copyBytes int) {
	switch {
	case shapes == "small":
		return 256, 8 << 20
	case t.Backend.Name() == "cpu":
		return 2048, 256 << 20
	}
	return 8192, 1 << 30
}

// mfuPeak is the peak MFU is taken against: the GPU's data-sheet bf16 peak
// where it is known, else the GEMM ceiling measured in this run.
func mfuPeak(t *target.Target, c bench.Ceilings) stepbench.Peak {
	if tf, name, ok := bench.SpecPeak(t.Device); ok && t.Backend.Name() == "cuda" {
		return stepbench.Peak{TFLOPs: tf, Name: name}
	}
	if c.GEMM != nil {
		return stepbench.Peak{TFLOPs: c.GEMM.TFLOPs, Name: fmt.Sprintf("GEMM ceiling measured in this run (%s, %.1f TFLOP/s)", c.GEMM.Impl, c.GEMM.TFLOPs)}
	}
	return stepbench.Peak{}
}

// Gate re-measures on t every kernel of ours in base (those o.Filter
// matches, when set), with base's shapes, dtype and repetitions, and
// compares (bench.Gate). Kernels that fail are
// measured once more and judged on the runs of both measurements together,
// so that one unlucky measurement does not fail a change. It returns the
// verdict and the new measurement.
func Gate(t *target.Target, base *bench.Result, maxSlowdown float64, o Options) (bench.GateReport, *bench.Result, error) {
	if base.Meta.Impl != bench.Ours {
		return bench.GateReport{}, nil, fmt.Errorf("the baseline was measured by %q, not by train bench", base.Meta.Impl)
	}
	keep := func(string) bool { return true }
	if o.Filter != "" {
		re, err := regexp.Compile(o.Filter)
		if err != nil {
			return bench.GateReport{}, nil, fmt.Errorf("filter: %w", err)
		}
		keep = re.MatchString
	}
	o.Suite, o.Shapes, o.DType, o.Filter = "kernels", base.Meta.Shapes, base.Meta.DType, ""
	if base.Meta.Reps > 0 {
		o.Reps = base.Meta.Reps
	}
	// The baseline's kernels of ours that the filter keeps are the ones gated.
	kept := *base
	kept.Kernels = nil
	names := map[string]bool{}
	for _, k := range base.Kernels {
		if k.Impl == bench.Ours && keep(k.Name) {
			names[k.Name] = true
			kept.Kernels = append(kept.Kernels, k)
		}
	}
	base = &kept
	if len(names) == 0 {
		return bench.GateReport{}, nil, fmt.Errorf("the baseline has no kernels of ours to compare with (after --filter)")
	}
	cur, err := measure(t, o, func(n string) bool { return names[n] }, false)
	if err != nil {
		return bench.GateReport{}, nil, err
	}
	g := bench.Gate(base, cur, maxSlowdown)
	failed := map[string]bool{}
	for _, n := range g.Failed() {
		failed[n] = true
	}
	if len(failed) == 0 {
		return g, cur, nil
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "%d kernels look slower; measuring them once more\n", len(failed))
	}
	again, err := measure(t, o, func(n string) bool { return failed[n] }, false)
	if err != nil {
		return bench.GateReport{}, nil, err
	}
	for _, k := range again.Kernels {
		if c := cur.Kernel(k.Name, k.Impl); c != nil {
			c.Combine(&k)
		}
	}
	return bench.Gate(base, cur, maxSlowdown), cur, nil
}

// GateFile is Gate against the result file at baseline, allowing the
// slowdown maxSlowdown as written ("5%"): it writes the verdict to w and
// the new measurement to jsonOut (when named), and fails naming every
// kernel slower than allowed.
func GateFile(t *target.Target, baseline, maxSlowdown, jsonOut string, o Options, w io.Writer) error {
	frac, err := bench.ParseFraction(maxSlowdown)
	if err != nil {
		return fmt.Errorf("maximum slowdown: %w", err)
	}
	base, err := bench.Read(baseline)
	if err != nil {
		return err
	}
	g, cur, err := Gate(t, base, frac, o)
	if err != nil {
		return err
	}
	g.Write(w)
	if jsonOut != "" {
		if err := cur.Write(jsonOut); err != nil {
			return err
		}
	}
	if f := g.Failed(); len(f) > 0 {
		return fmt.Errorf("%d kernels slower than %s by more than allowed: %v", len(f), baseline, f)
	}
	return nil
}
