package bench

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// kernel returns one of our kernels with the given runs, its figures derived.
func kernel(name, impl, bound string, runs ...float64) Kernel {
	k := Kernel{Name: name, Impl: impl, Bound: bound, FLOPs: 2e12, Bytes: 3e9, Copies: 2, RotationBytes: 6e9}
	k.SetRuns(runs, 10)
	return k
}

func sample() *Result {
	r := &Result{Schema: Schema, Meta: Meta{Impl: Ours, Version: "devel", Commit: "abc123", Tags: "cuda", Date: "2025-01-02T03:04:05Z", Backend: "cuda",
		Device: "NVIDIA H100 80GB HBM3", Driver: "580.65.06, CUDA 13.0", Toolkit: "11.8", GEMM: "cublaslt 13.1.0 (libcublasLt.so.13)", L2Bytes: 50 << 20,
		Timer: "cuda events", Shapes: "llama8b", DType: "bf16", Reps: 3, Versions: map[string]string{"go": "go1.26"},
		Notes: []string{"a note"}}}
	g := kernel("ceiling/gemm/square/bf16/8192", CuBLASLt, Compute, 0.0014, 0.0013, 0.0014)
	c := kernel("ceiling/copy/1024MiB", Ours, Memory, 0.0007, 0.0007, 0.0008)
	r.Ceilings = Ceilings{GEMM: &g, Copy: &c}
	for _, k := range []Kernel{
		kernel("gemm/llama8b-2k/q/fwd/bf16/2048x4096x4096", Ours, Compute, 0.002, 0.0021, 0.002),
		kernel("gemm/llama8b-2k/q/fwd/bf16/2048x4096x4096", CuBLASLt, Compute, 0.0011, 0.0011, 0.0012),
		kernel("rmsnorm/llama8b-2k/bf16", Ours, Memory, 0.0012, 0.0012, 0.0013),
		{Name: "attention/bwd/bf16/b1xT8192/H32/G8/D128", Impl: Ours, Bound: Compute, Error: "out of memory"},
	} {
		k.SetCeiling(r.Ceilings)
		r.Kernels = append(r.Kernels, k)
	}
	s := Step{Name: "lora_step/llama-3.1-8b/T2048/r16", Impl: Ours, GEMM: CuBLASLt, Model: "llama-3.1-8b", Seqs: 1, SeqLen: 2048, Tokens: 2048,
		LoRARank: 16, FLOPsPerToken: 3.1e10, FLOPCount: "4N", PeakBytes: 20 << 30, PeakWhat: "allocator", DeviceUsedBytes: 21 << 30, InitS: 12, Launches: 1893}
	s.SetRuns([]float64{0.5, 0.52, 0.51}, 989.4, "spec")
	s.Profile = &OpProfile{Steps: 1, WallS: 0.55, DeviceS: 0.5, Ops: []OpTotal{
		{Op: "Gemm (cuBLASLt)", Extents: "2048×14336×4096", Calls: 64, Launches: 64, Seconds: 0.2, FLOPs: 64 * 2 * 2048 * 14336 * 4096,
			Bytes: 64 * 2 * (2048*4096 + 14336*4096 + 2048*14336)},
		{Op: "AttentionBackward", Extents: "2048×32×128, 2048 keys", Calls: 32, Launches: 32, Seconds: 0.15},
		{Op: "Gemm (cuBLASLt)", Extents: "2048×4096×4096", Calls: 96, Launches: 96, Seconds: 0.1},
		{Op: "RMSNormBackward", Calls: 64, Launches: 128, Seconds: 0.05},
	}}
	r.Steps = []Step{s, {Name: "lora_step/llama-3.1-8b/T8192/r16", Impl: Ours, GEMM: CuBLASLt, Error: "out of memory"}}
	gen := Generation{Name: "decode/llama-3.1-8b/b16/p512/n64", Impl: Ours, GEMM: CuBLASLt, Model: "llama-3.1-8b", Phase: "decode", Batch: 16, Prompt: 512, NewTokens: 64,
		Launches: 452, Calls: 1.05}
	gen.SetRuns([]float64{0.4, 0.41, 0.39}, 16*64)
	gen.Profile = &OpProfile{Steps: 64, WallS: 0.012, DeviceS: 0.005, Ops: []OpTotal{
		{Op: "Gemm (cuBLASLt)", Extents: "16×14336×4096", Calls: 2, Launches: 2, Seconds: 0.004, FLOPs: 2 * 2 * 16 * 14336 * 4096,
			Bytes: 2 * 2 * (16*4096 + 14336*4096 + 16*14336)},
		{Op: "Attention", Extents: "16×32×128, 576 keys", Calls: 32, Launches: 64, Seconds: 0.001},
	}}
	r.Generation = []Generation{gen}
	return r
}

func TestRoundTrip(t *testing.T) {
	want := sample()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := want.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back differs:\n got %+v\nwant %+v", got, want)
	}
}

func TestDerivedFigures(t *testing.T) {
	r := sample()
	k := r.Kernel("gemm/llama8b-2k/q/fwd/bf16/2048x4096x4096", Ours)
	if k.Median != 0.002 || k.TFLOPs != 1000 || k.GBs != 1500 {
		t.Errorf("median %v, TFLOP/s %v, GB/s %v; want 0.002, 1000, 1500", k.Median, k.TFLOPs, k.GBs)
	}
	// 1000 TFLOP/s over a ceiling of 2e12/0.0014 s ≈ 1428.6 TFLOP/s.
	if want := 100 * 1000 / (2e12 / 0.0014 / 1e12); k.PctCeiling < want-1e-9 || k.PctCeiling > want+1e-9 {
		t.Errorf("%% of ceiling %v, want %v", k.PctCeiling, want)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", m)
	}
	s := r.Steps[0]
	if s.TokensPerS != 2048/0.51 || s.MFU != s.TFLOPs/989.4 {
		t.Errorf("step: %v tokens/s, MFU %v", s.TokensPerS, s.MFU)
	}
}

func TestParseRejects(t *testing.T) {
	good := `{"schema": "turnwise-bench/1", "meta": {"impl": "turnwise", "date": "d", "backend": "cpu", "device": "x"}, "ceilings": {},
	"kernels": [{"name": "k", "impl": "turnwise", "bound": "memory", "runs_s": [1e-3], "median_s": 1e-3}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("a valid result is rejected: %v", err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"schema", `turnwise-bench/1`, `turnwise-bench/0`, "schema"},
		{"unknown field", `"bound"`, `"bnd"`, "unknown field"},
		{"bound", `"memory"`, `"disk"`, "bound"},
		{"zero run", `[1e-3]`, `[0]`, "run 0"},
		{"missing median", `, "median_s": 1e-3`, ``, "median"},
		{"no impl", `"impl": "turnwise", "bound"`, `"impl": "", "bound"`, "required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(good, c.from, c.to, 1)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	step := `{"schema": "turnwise-bench/1", "meta": {"impl": "turnwise", "date": "d", "backend": "cpu", "device": "x"}, "ceilings": {},
	"steps": [{"name": "s", "impl": "turnwise", "model": "m", "seqs": 1, "seq": 4, "tokens": 4, "lora_rank": 1, "recompute": false,
	"runs_s": [1], "median_s": 1, "profile": {"steps": 1, "wall_s": 1, "device_s": 0.5, "ops": [{"op": "Gemm", "calls": 2, "launches": 2, "s": 0.5}]}}]}`
	if _, err := Parse([]byte(step)); err != nil {
		t.Fatalf("a valid step profile is rejected: %v", err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"no profiled steps", `"steps": 1`, `"steps": 0`, "profile of 0 steps"},
		{"no wall time", `"wall_s": 1`, `"wall_s": 0`, "profile of 1 steps"},
		{"unnamed op", `"op": "Gemm"`, `"op": ""`, "profile op"},
		{"no calls", `"calls": 2`, `"calls": 0`, "profile op"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(step, c.from, c.to, 1)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestParseDuplicate(t *testing.T) {
	r := sample()
	r.Kernels = append(r.Kernels, r.Kernels[0])
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a kernel listed twice: error %v", err)
	}
}

// TestOldMeta checks that a result written before Meta carried the
// binary's version and build tags still reads.
func TestOldMeta(t *testing.T) {
	raw, err := sample().marshal()
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(strings.Replace(string(raw), `"version": "devel",`, "", 1), `"tags": "cuda",`, "", 1)
	if old == string(raw) || strings.Contains(old, `"tags"`) {
		t.Fatalf("the sample's version and tags were not removed:\n%s", old)
	}
	r, err := Parse([]byte(old))
	if err != nil || r.Meta.Version != "" || r.Meta.Tags != "" || r.Meta.Commit != "abc123" {
		t.Errorf("an old result: %v, meta %+v", err, r.Meta)
	}
}

// TestNewMeta checks that our results record what the binary was built
// from.
func TestNewMeta(t *testing.T) {
	m := NewMeta()
	if m.Impl != Ours || m.Version == "" || !strings.HasPrefix(m.Versions["go"], "go") {
		t.Errorf("NewMeta() = %+v: want our impl, a version and the Go version", m)
	}
	if m.Commit == "" && !slices.Contains(m.Notes, buildinfo.NoCommitNote) {
		t.Errorf("a meta without a commit lacks the note on how to record one: %+v", m)
	}
}
