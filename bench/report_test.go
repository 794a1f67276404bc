package bench

import (
	"bytes"
	"strings"
	"testing"
)

// peer is a PyTorch result: SDPA attention and a PEFT step.
func peer() *Result {
	r := &Result{Schema: Schema, Meta: Meta{Impl: "pytorch", Date: "d", Backend: "torch", Device: "NVIDIA H100 80GB HBM3",
		Versions: map[string]string{"torch": "2.11"}}}
	a := kernel("attention/fwd/bf16/b1xT2048/H32/G8/D128", TorchSDPA, Compute, 0.001, 0.001, 0.001)
	r.Kernels = []Kernel{a}
	s := Step{Name: "lora_step/llama-3.1-8b/T2048/r16", Impl: TorchPEFT, Tokens: 2048, PeakBytes: 30 << 30, FLOPsPerToken: 3.1e10}
	s.SetRuns([]float64{0.6, 0.6, 0.6}, 0, "")
	r.Steps = []Step{s}
	return r
}

func TestMarkdownTargets(t *testing.T) {
	ours := sample()
	// Our attention forward at 1.8 ms beside SDPA's 1 ms: 0.56× ≥ 0.5.
	ours.Kernels = append(ours.Kernels, kernel("attention/fwd/bf16/b1xT2048/H32/G8/D128", Ours, Compute, 0.0018, 0.0018, 0.0018))
	var md bytes.Buffer
	if err := WriteMarkdown(&md, []string{"ours.json", "torch.json"}, []*Result{ours, peer()}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		// Our GEMM at 2 ms beside cuBLASLt's 1.1 ms: 0.55× < 0.70.
		"|   gemm/llama8b-2k/q/fwd/bf16/2048x4096x4096 | 0.55× cublaslt (1000.0 TFLOP/s vs 1818.2 TFLOP/s) | FAIL |",
		"|   attention/fwd/bf16/b1xT2048/H32/G8/D128 | 0.56× torch-sdpa",
		// rmsnorm: 3 GB in 1.2 ms = 2500 GB/s over a copy of 3 GB in 0.7 ms = 4286 GB/s: 58%.
		"|   rmsnorm/llama8b-2k/bf16 | 2500 GB/s = 58% of copy | FAIL |",
		// Our step: 2048 tokens in 0.51 s beside 0.6 s, at 20 GiB beside 30 GiB.
		"|   lora_step/llama-3.1-8b/T2048/r16 (GEMM cublaslt) | 1.18× tokens/s (4016 vs 3413); peak 20.00 GiB vs 30.00 GiB | PASS |",
		// Our row carries the ratios over the peer's.
		"| lora_step/llama-3.1-8b/T2048/r16 | turnwise | cublaslt | 2048 | 510.000 ms | 4016 | 12.6% | 20.00 GiB | 21.00 GiB | 1893 | 1.18× | 0.67× |",
		// Launches and host calls per decoding step.
		"| decode/llama-3.1-8b/b16/p512/n64 | turnwise | cublaslt | decode | 16 | 400.000 ms | 2560 | 452 | 1 |",
		// The peer's MFU, against the H100's data-sheet peak: 3.1e10·2048/0.6/989.4e12.
		"| lora_step/llama-3.1-8b/T2048/r16 | pytorch-peft |  | 2048 | 600.000 ms | 3413 | 10.7% |",
		"| ours.json | turnwise | cuda | cublaslt | NVIDIA H100 80GB HBM3 |",
		"torch 2.11",
		"error: out of memory",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

func TestMarkdownStepMemoryFails(t *testing.T) {
	ours, p := sample(), peer()
	p.Steps[0].PeakBytes = 10 << 30 // the peer needs less memory than our 20 GiB
	var md bytes.Buffer
	if err := WriteMarkdown(&md, []string{"a", "b"}, []*Result{ours, p}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "FAIL (more memory)") {
		t.Errorf("a faster step that needs more memory is not failed:\n%s", md.String())
	}
}

// TestMarkdownStepsOfBothGEMMs: our steps measured with cuBLASLt and with
// our own GEMM sit side by side, each with its own verdict against the peer.
func TestMarkdownStepsOfBothGEMMs(t *testing.T) {
	cub, own := sample(), sample()
	own.Kernels, own.Ceilings = nil, Ceilings{}
	own.Meta.GEMM = "own"
	for i := range own.Steps {
		own.Steps[i].GEMM = "own"
		own.Steps[i].SetRuns([]float64{1.02, 1.02, 1.02}, 989.4, "spec") // half cuBLASLt's tokens/s
	}
	for i := range own.Generation {
		own.Generation[i].GEMM = "own"
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, []string{"step.json", "step-own.json", "torch.json"}, []*Result{cub, own, peer()}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"|   lora_step/llama-3.1-8b/T2048/r16 (GEMM cublaslt) | 1.18× tokens/s (4016 vs 3413)",
		"|   lora_step/llama-3.1-8b/T2048/r16 (GEMM own) | 0.59× tokens/s (2008 vs 3413)",
		"| lora_step/llama-3.1-8b/T2048/r16 | turnwise | own | 2048 | 1.020 s | 2008 |",
		"| step-own.json | turnwise | cuda | own |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

func TestMergeRejectsDuplicates(t *testing.T) {
	if _, err := Merge(sample(), sample()); err == nil || !strings.Contains(err.Error(), "more than one file") {
		t.Errorf("merging a result with itself: %v", err)
	}
}

func TestSpecPeak(t *testing.T) {
	for _, c := range []struct {
		dev  string
		want float64
	}{{"NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", 989.4}, {"NVIDIA H100 PCIe", 756}, {"NVIDIA H200", 989.4},
		{"NVIDIA A100-SXM4-80GB", 312}, {"AMD EPYC", 0}} {
		if got, _, _ := SpecPeak(c.dev); got != c.want {
			t.Errorf("SpecPeak(%q) = %v, want %v", c.dev, got, c.want)
		}
	}
}

// TestMarkdownProfile: a profiled step's section sums its ops by op (the
// two GEMM extents into one row), then lists the ops by extents with their
// cumulative share, and gives the device's busy share of the wall time.
func TestMarkdownProfile(t *testing.T) {
	var md bytes.Buffer
	if err := WriteMarkdown(&md, []string{"ours.json"}, []*Result{sample()}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"### lora_step/llama-3.1-8b/T2048/r16 (GEMM cublaslt)",
		// 0.5 s of 0.55.
		"One more training step: 550.000 ms on the host's clock, the device busy with an op for 90.9% of it (500.000 ms).",
		"| op | calls | launches | time | per call | share |",
		// 0.2 + 0.1 s in 64 + 96 calls: 60% of 0.5 s.
		"| Gemm (cuBLASLt) | 160 | 160 | 300.000 ms | 1.875 ms | 60.0% |",
		"| RMSNormBackward | 64 | 128 | 50.000 ms | 781.25 µs | 10.0% |",
		// 64 GEMMs of 2·2048·14336·4096 FLOPs and 2·(2048·4096 + 14336·4096 +
		// 2048·14336) bytes in 0.2 s: 77.0 TFLOP/s, 62 GB/s.
		"| Gemm (cuBLASLt) | 2048×14336×4096 | 64 | 64 | 200.000 ms | 3.125 ms | 40.0% | 40.0% | 77.0 TFLOP/s, 62 GB/s |",
		"| AttentionBackward | 2048×32×128, 2048 keys | 32 | 32 | 150.000 ms | 4.688 ms | 30.0% | 70.0% |  |",
		"| RMSNormBackward |  | 64 | 128 | 50.000 ms | 781.25 µs | 10.0% | 100.0% |  |",
		// The decoding profile beside the replayed step: 0.4 s for 64 steps.
		"### decode/llama-3.1-8b/b16/p512/n64 (GEMM cublaslt)",
		// 5 ms of ops per step against 0.4 s for 64 replayed steps.
		"run back to back as a graph's do): the ops take 5.000 ms per step, 80.0% of a timed step's 6.250 ms.",
		// 2 · 2·16·14336·4096 FLOPs and 2 · 2·(16·4096 + 14336·4096 + 16·14336) bytes in 4 ms.
		"| Gemm (cuBLASLt) | 16×14336×4096 | 2 | 2 | 4.000 ms | 2.000 ms | 80.0% | 80.0% | 939.5 GFLOP/s, 59 GB/s |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The kinds table lists the GEMM first (the most time), then attention.
	if g, a := strings.Index(out, "| Gemm (cuBLASLt) | 160"), strings.Index(out, "| AttentionBackward | 32"); g < 0 || a < g {
		t.Errorf("the ops are not by time, most first")
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// TestMarkdownHeld: a kernel measured behind holds is marked, and the mark
// explained under the table; a report without one has neither.
func TestMarkdownHeld(t *testing.T) {
	const note = "‡ The host queued these calls more slowly than the device ran them"
	for _, held := range []bool{false, true} {
		r := sample()
		k := kernel("scatter_rows/llama8b-2k/bf16", Ours, Memory, 2e-6, 2e-6, 2e-6)
		k.Held = held
		r.Kernels = append(r.Kernels, k)
		var md bytes.Buffer
		if err := WriteMarkdown(&md, []string{"ours.json"}, []*Result{r}); err != nil {
			t.Fatal(err)
		}
		out := md.String()
		if got := strings.Contains(out, "| scatter_rows/llama8b-2k/bf16 | turnwise | 2.00 µs ‡ |"); got != held {
			t.Errorf("held %v: row marked %v", held, got)
		}
		if got := strings.Contains(out, note); got != held {
			t.Errorf("held %v: note under the table %v", held, got)
		}
	}
}
