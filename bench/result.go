// Package bench holds what turnwise's benchmarks produce: the JSON schema
// that `train bench` and its Python peers (bench/peers) both write, reading
// and checking it, markdown tables with ratios to the ceilings and peers
// measured in the same run, and the kernel regression gate.
//
// Results are matched across files by name: a kernel, a training step or a
// generation phase measured by several implementations (ours, cuBLASLt,
// PyTorch) carries the same Name and a different Impl. Names are built by
// the functions that define the cases (bench/opbench, bench/stepbench) and,
// for the peers, by bench/peers/torch_peers.py in the same format.
package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/outfile"
)

// Schema identifies the format of a Result file.
const Schema = "turnwise-bench/1"

// Impl names of the implementations results come from.
const (
	Ours = "turnwise" // our kernels and model code
)

// Result is one benchmark run: where and how it was measured, and what.
type Result struct {
	Schema     string       `json:"schema"`
	Meta       Meta         `json:"meta"`
	Ceilings   Ceilings     `json:"ceilings"`
	Kernels    []Kernel     `json:"kernels,omitempty"`
	Steps      []Step       `json:"steps,omitempty"`
	Generation []Generation `json:"generation,omitempty"`
}

// Meta says where, when and by what a Result was measured.
type Meta struct {
	Impl     string `json:"impl"`               // who measured: Ours or a peer ("pytorch")
	Version  string `json:"version,omitempty"`  // our binary's version (buildinfo.Info.Version)
	Commit   string `json:"commit,omitempty"`   // the source revision of the binary
	Modified bool   `json:"modified,omitempty"` // built with uncommitted changes
	Tags     string `json:"tags,omitempty"`     // our binary's build tags (cuda, cudaemu)
	Date     string `json:"date"`               // RFC 3339, UTC
	Backend  string `json:"backend"`            // cpu, cuda, cudaemu; torch for the peer
	Device   string `json:"device"`             // GPU or CPU model
	Driver   string `json:"driver,omitempty"`   // GPU driver (CUDA driver API version)
	Toolkit  string `json:"toolkit,omitempty"`  // CUDA toolkit the binary was built with
	// GEMM is the GEMM the backend ran the model steps and every op but the
	// kernel suite's own GEMMs with ("own", "cublaslt …", "openblas"); the
	// GEMM kernels of impl Ours are always turnwise's own kernel.
	GEMM        string            `json:"gemm,omitempty"`
	L2Bytes     int64             `json:"l2_bytes,omitempty"` // last-level cache the inputs are rotated past
	MemoryBytes int64             `json:"memory_bytes,omitempty"`
	Threads     int               `json:"threads,omitempty"` // CPU worker threads
	Timer       string            `json:"timer,omitempty"`   // how kernel time was taken
	Shapes      string            `json:"shapes,omitempty"`  // the shape set (llama8b, ref24m, small)
	DType       string            `json:"dtype,omitempty"`   // activation and weight dtype
	Reps        int               `json:"reps,omitempty"`    // repetitions per measurement (medians of these)
	Versions    map[string]string `json:"versions,omitempty"`
	Notes       []string          `json:"notes,omitempty"`
	Skipped     string            `json:"skipped,omitempty"` // why nothing was measured (a peer without PyTorch)
}

// Kernel is one op at one shape by one implementation.
type Kernel struct {
	Name  string  `json:"name"`  // op and shape; the key results are matched by
	Impl  string  `json:"impl"`  // Ours, "cublaslt", "torch-sdpa", ...
	Bound string  `json:"bound"` // "compute" (TFLOP/s matters) or "memory" (GB/s matters)
	FLOPs float64 `json:"flops,omitempty"`
	Bytes int64   `json:"bytes,omitempty"` // the least traffic the op must make

	Runs   []float64 `json:"runs_s,omitempty"` // seconds per call, one per repetition
	Median float64   `json:"median_s,omitempty"`
	Iters  int       `json:"iters,omitempty"`  // calls timed per repetition
	Copies int       `json:"copies,omitempty"` // input sets the calls rotate through
	// RotationBytes is the memory the calls rotate through (Copies × Bytes).
	RotationBytes int64 `json:"rotation_bytes,omitempty"`
	// Held: the host queued the calls more slowly than the device ran them,
	// so the timed runs were queued behind a wait on the device and the
	// times are the device's alone (bench/kernelbench).
	Held bool `json:"held,omitempty"`

	TFLOPs     float64 `json:"tflops,omitempty"`      // FLOPs / Median / 1e12
	GBs        float64 `json:"gbs,omitempty"`         // Bytes / Median / 1e9
	PctCeiling float64 `json:"pct_ceiling,omitempty"` // of the GEMM (compute) or copy (memory) ceiling
	Error      string  `json:"error,omitempty"`
}

// Bound values.
const (
	Compute = "compute"
	Memory  = "memory"
)

// Ceilings are what the device reached in the same run: a large GEMM by the
// vendor library and a device-to-device copy (bytes read + written).
type Ceilings struct {
	GEMM *Kernel `json:"gemm,omitempty"`
	Copy *Kernel `json:"copy,omitempty"`
}

// Step is a training step at one configuration.
type Step struct {
	Name string `json:"name"`
	Impl string `json:"impl"`
	// GEMM is the GEMM our step ran with (ShortGEMM of Meta.GEMM: "own",
	// "cublaslt", "openblas"); empty for the peers'.
	GEMM      string    `json:"gemm,omitempty"`
	Model     string    `json:"model"`
	Seqs      int       `json:"seqs"`   // sequences per step
	SeqLen    int       `json:"seq"`    // tokens per sequence
	Tokens    int       `json:"tokens"` // tokens per step
	LoRARank  int       `json:"lora_rank"`
	Recompute bool      `json:"recompute"`
	Runs      []float64 `json:"runs_s,omitempty"` // seconds per step
	Median    float64   `json:"median_s,omitempty"`

	TokensPerS    float64 `json:"tokens_per_s,omitempty"`
	FLOPsPerToken float64 `json:"flops_per_token,omitempty"`
	FLOPCount     string  `json:"flop_count,omitempty"` // how FLOPsPerToken is counted
	TFLOPs        float64 `json:"tflops,omitempty"`     // FLOPsPerToken · TokensPerS / 1e12
	MFU           float64 `json:"mfu,omitempty"`        // TFLOPs over MFUPeak
	MFUPeak       string  `json:"mfu_peak,omitempty"`   // the peak MFU is taken against

	// PeakBytes is the most device memory held during the step; PeakWhat
	// says what it counts (allocator high-water mark, caches included or not).
	PeakBytes int64  `json:"peak_bytes,omitempty"`
	PeakWhat  string `json:"peak_what,omitempty"`
	// ReservedBytes is a caching allocator's peak including its cache, where
	// that differs from PeakBytes (PyTorch's max_memory_reserved).
	ReservedBytes int64 `json:"reserved_bytes,omitempty"`
	// DeviceUsedBytes is the device's used memory (total − free, as the
	// driver reports it) after the timed steps: everything, the context included.
	DeviceUsedBytes int64   `json:"device_used_bytes,omitempty"`
	InitS           float64 `json:"init_s,omitempty"` // building the model and adapters
	// Launches are our step's kernels, device copies and memsets, per step
	// (engine.LaunchCounter; absent where the backend does not count).
	Launches float64 `json:"launches_per_step,omitempty"`
	// Profile is where one further step's device time went, op by op
	// (absent where the backend cannot time its ops).
	Profile *OpProfile `json:"profile,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// OpProfile is where the device time of profiled steps went: each op timed
// on its own (engine.OpProfiler), the ops summed by label.
type OpProfile struct {
	Steps int `json:"steps"` // steps profiled (a training step; decoding: a token per sequence)
	// An op's time runs from the device reaching the mark queued before it
	// to the one after; the cuda backend holds the device back while the
	// host queues each run of ops (engine/cuda's opProfile), so that a small
	// op's time is its own rather than the host's time to queue it.
	// WallS is the profiled steps' time on the host's clock, ops queued to
	// device done, per step. The timing marks between ops, the holds, and
	// for decoding the ops launched one by one instead of replayed as one
	// recording, make it longer than the timed steps'; DeviceS over WallS is
	// the share of it the device was busy with an op.
	WallS   float64 `json:"wall_s"`
	DeviceS float64 `json:"device_s"` // the ops' device times summed, per step
	// Ops are the ops by name and extents, the most device time first;
	// their calls, launches and seconds are per step.
	Ops []OpTotal `json:"ops"`
}

// OpTotal is the calls of one op at one extents in an OpProfile, per step.
type OpTotal struct {
	Op       string  `json:"op"`                // engine.OpTime.Op
	Extents  string  `json:"extents,omitempty"` // engine.OpTime.Extents: what sets its cost beyond its element count
	Calls    float64 `json:"calls"`
	Launches float64 `json:"launches"`
	Seconds  float64 `json:"s"`
	FLOPs    float64 `json:"flops,omitempty"` // engine.OpTime.FLOPs summed: where the extents alone set them
	Bytes    float64 `json:"bytes,omitempty"` // engine.OpTime.Bytes summed: of the ops with FLOPs
}

// Generation is the prefill or decode phase of generation at one batch size.
type Generation struct {
	Name       string    `json:"name"`
	Impl       string    `json:"impl"`
	GEMM       string    `json:"gemm,omitempty"` // as Step.GEMM
	Model      string    `json:"model"`
	Phase      string    `json:"phase"` // "prefill" or "decode"
	Batch      int       `json:"batch"`
	Prompt     int       `json:"prompt"`     // prompt tokens per sequence
	NewTokens  int       `json:"new_tokens"` // decode steps timed (decode only)
	Runs       []float64 `json:"runs_s,omitempty"`
	Median     float64   `json:"median_s,omitempty"`
	TokensPerS float64   `json:"tokens_per_s,omitempty"`
	// Launches are our kernels, device copies and memsets per step — the
	// prefill, or one decoding step (a token per sequence) — and Calls the
	// host's calls that queued them, a replayed recording of a step (a
	// CUDA graph) being one (engine.LaunchCounter; both absent where the
	// backend does not count).
	Launches float64 `json:"launches_per_step,omitempty"`
	Calls    float64 `json:"calls_per_step,omitempty"`
	// Profile is where a decoding step's device time went, op by op, its
	// ops launched one by one (decode only; absent where the backend cannot
	// time its ops).
	Profile *OpProfile `json:"profile,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// ShortGEMM names a GEMM as the result tables do: "cublaslt" for any
// cuBLASLt ("cublaslt 13.1.0 (/path)"), else the name itself.
func ShortGEMM(name string) string {
	if strings.HasPrefix(name, CuBLASLt) {
		return CuBLASLt
	}
	return name
}

// Write writes r to path as indented JSON.
func (r *Result) Write(path string) error {
	raw, err := r.marshal()
	if err != nil {
		return fmt.Errorf("bench result for %s: %w", path, err)
	}
	if err := outfile.WriteFile(path, raw, 0o644); err != nil {
		return fmt.Errorf("writing bench result: %w", err)
	}
	return nil
}

// Encode checks r and writes it to w as Write writes it to a file.
func (r *Result) Encode(w io.Writer) error {
	raw, err := r.marshal()
	if err != nil {
		return fmt.Errorf("bench result: %w", err)
	}
	_, err = w.Write(raw)
	return err
}

// marshal checks r and returns it as indented JSON and a newline.
func (r *Result) marshal() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	return append(raw, '\n'), err
}

// Read reads and checks a Result file.
func Read(path string) (*Result, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading bench result: %w", err)
	}
	r, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bench result %s: %w", path, err)
	}
	return r, nil
}

// Parse decodes and checks a Result. Unknown fields are errors, so that a
// misspelt field in a hand-edited baseline does not pass silently.
func Parse(raw []byte) (*Result, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return nil, jsonerr.Reword(err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate reports every inconsistency in r: the schema, required fields,
// and timings that are not positive and finite.
func (r *Result) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if r.Schema != Schema {
		bad("schema %q, want %q", r.Schema, Schema)
	}
	if r.Meta.Impl == "" {
		bad("meta.impl is empty")
	}
	if r.Meta.Date == "" {
		bad("meta.date is empty")
	}
	times := func(what string, runs []float64, median float64, failed bool) {
		if failed {
			return
		}
		if len(runs) == 0 {
			bad("%s: no runs", what)
		}
		for i, s := range runs {
			if !(s > 0) || math.IsInf(s, 0) {
				bad("%s: run %d took %v s", what, i, s)
			}
		}
		if !(median > 0) || math.IsInf(median, 0) {
			bad("%s: median %v s", what, median)
		}
	}
	profile := func(what string, p *OpProfile) {
		if p == nil {
			return
		}
		if p.Steps < 1 || !(p.WallS > 0) || !(p.DeviceS >= 0) || math.IsInf(p.WallS, 0) || math.IsInf(p.DeviceS, 0) {
			bad("%s: profile of %d steps, %v s wall, %v s device: want ≥ 1 step and finite times, the wall's positive", what, p.Steps, p.WallS, p.DeviceS)
		}
		for _, o := range p.Ops {
			if o.Op == "" || !(o.Seconds >= 0) || !(o.Calls > 0) || math.IsInf(o.Seconds, 0) {
				bad("%s: profile op %q %q: %v calls, %v s: want a name, calls and a finite time", what, o.Op, o.Extents, o.Calls, o.Seconds)
			}
		}
	}
	seen := map[string]bool{}
	kernel := func(where string, k *Kernel) {
		if k.Name == "" || k.Impl == "" {
			bad("%s: name %q, impl %q: both are required", where, k.Name, k.Impl)
		}
		if k.Bound != Compute && k.Bound != Memory {
			bad("%s %s: bound %q, want %q or %q", where, k.Name, k.Bound, Compute, Memory)
		}
		times(where+" "+k.Name+" ("+k.Impl+")", k.Runs, k.Median, k.Error != "")
	}
	for i := range r.Kernels {
		k := &r.Kernels[i]
		kernel("kernel", k)
		key := k.Name + "\x00" + k.Impl
		if seen[key] {
			bad("kernel %s (%s) appears twice", k.Name, k.Impl)
		}
		seen[key] = true
	}
	if r.Ceilings.GEMM != nil {
		kernel("ceiling", r.Ceilings.GEMM)
	}
	if r.Ceilings.Copy != nil {
		kernel("ceiling", r.Ceilings.Copy)
	}
	for _, s := range r.Steps {
		if s.Name == "" || s.Impl == "" {
			bad("step: name %q, impl %q: both are required", s.Name, s.Impl)
		}
		times("step "+s.Name, s.Runs, s.Median, s.Error != "")
		profile("step "+s.Name, s.Profile)
	}
	for _, g := range r.Generation {
		if g.Name == "" || g.Impl == "" {
			bad("generation: name %q, impl %q: both are required", g.Name, g.Impl)
		}
		if g.Phase != "prefill" && g.Phase != "decode" {
			bad("generation %s: phase %q, want prefill or decode", g.Name, g.Phase)
		}
		times("generation "+g.Name, g.Runs, g.Median, g.Error != "")
		profile("generation "+g.Name, g.Profile)
	}
	return errors.Join(errs...)
}

// Kernel returns the kernel of r with the given name and implementation, or nil.
func (r *Result) Kernel(name, impl string) *Kernel {
	for i := range r.Kernels {
		if r.Kernels[i].Name == name && r.Kernels[i].Impl == impl {
			return &r.Kernels[i]
		}
	}
	return nil
}
