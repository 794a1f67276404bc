package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/bench"
)

// TestBenchGate measures two kernels, then gates against doctored
// baselines: one a hundred times faster than now (both kernels must be
// named and the exit status non-zero) and one a hundred times slower (a
// pass). The factors are far beyond what a loaded machine's noise makes.
func TestBenchGate(t *testing.T) {
	dir := t.TempDir()
	now := filepath.Join(dir, "now.json")
	if _, err := runCmd(t, runBench, "", "--suite", "kernels", "--small", "--filter", "^(rmsnorm|swiglu)/",
		"--reps", "5", "--min-time", "2ms", "--threads", "1", "--quiet", "--out", now); err != nil {
		t.Fatal(err)
	}
	r, err := bench.Read(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kernels) != 2 {
		t.Fatalf("measured %d kernels, want rmsnorm and swiglu", len(r.Kernels))
	}
	scaled := func(name string, f float64) string {
		b := *r
		b.Kernels = nil
		for _, k := range r.Kernels {
			runs := make([]float64, len(k.Runs))
			for i := range runs {
				runs[i] = k.Runs[i] * f
			}
			k.SetRuns(runs, k.Iters)
			b.Kernels = append(b.Kernels, k)
		}
		path := filepath.Join(dir, name)
		if err := b.Write(path); err != nil {
			t.Fatal(err)
		}
		return path
	}

	var out, errOut bytes.Buffer
	code := run([]string{"bench", "--baseline", scaled("fast.json", 0.01), "--max-slowdown", "5%", "--threads", "1", "--quiet"}, nil, &out, &errOut)
	if code == 0 {
		t.Errorf("exit status 0 against a baseline a hundred times faster:\n%s", out.String())
	}
	for _, want := range []string{"rmsnorm/small/f32", "swiglu/small/f32", "2 of 2 kernels got slower", "noise floor"} {
		if !strings.Contains(out.String()+errOut.String(), want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, out.String(), errOut.String())
		}
	}

	// --filter gates only the kernels it matches.
	out.Reset()
	errOut.Reset()
	code = run([]string{"bench", "--baseline", scaled("fast.json", 0.01), "--filter", "^rmsnorm/", "--threads", "1", "--quiet"}, nil, &out, &errOut)
	if code == 0 || !strings.Contains(out.String(), "1 of 1 kernels got slower: rmsnorm/small/f32") {
		t.Errorf("--filter rmsnorm: exit %d\n%s", code, out.String())
	}

	out.Reset()
	errOut.Reset()
	if code := run([]string{"bench", "--baseline", scaled("slow.json", 100), "--max-slowdown", "0.05", "--threads", "1", "--quiet"}, nil, &out, &errOut); code != 0 {
		t.Errorf("exit status %d against a baseline a hundred times slower:\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "all 2 kernels within the allowed slowdown") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestBenchReport merges our result with a peer's into one report.
func TestBenchReport(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.json")
	if _, err := runCmd(t, runBench, "", "--suite", "step", "--small", "--steps", "1", "--reps", "1", "--threads", "1", "--quiet", "--out", ours); err != nil {
		t.Fatal(err)
	}
	peer := filepath.Join(dir, "peer.json")
	skipped := `{"schema": "turnwise-bench/1", "meta": {"impl": "pytorch", "date": "d", "backend": "torch", "device": "", "skipped": "PyTorch is not importable"}, "ceilings": {}}`
	if err := os.WriteFile(peer, []byte(skipped), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(dir, "report.md")
	if _, err := runCmd(t, runBench, "", "report", "--out", md, ours, peer); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lora_step/tiny/T32/r4", "skipped: PyTorch is not importable", "not measured: no PyTorch + PEFT step result", "prefill/tiny/b1/p16"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("report lacks %q:\n%s", want, raw)
		}
	}
	if _, err := runCmd(t, runBench, "", "report", filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: error %v, want one naming it", err)
	}
}

// TestBenchJSONStdout checks that --json - prints the measurement as JSON,
// and nothing else, on standard output, the same schema a file gets.
func TestBenchJSONStdout(t *testing.T) {
	out, err := runCmd(t, runBench, "", "--suite", "step", "--small", "--steps", "1", "--reps", "1", "--threads", "1", "--quiet", "--json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := bench.Parse([]byte(out))
	if err != nil {
		t.Fatalf("bench --json printed no result: %v\n%s", err, out)
	}
	if !strings.Contains(out, "lora_step/tiny/T32/r4") || strings.Contains(out, "|") {
		t.Errorf("bench --json (%s): want the step's entry and no markdown:\n%s", r.Meta.Backend, out)
	}
	if r.Meta.GEMM != "openblas" || len(r.Steps) == 0 || r.Steps[0].GEMM != "openblas" {
		t.Errorf("bench --json records GEMM %q (steps: %d): want openblas, and on each step", r.Meta.GEMM, len(r.Steps))
	}
	if _, err := runCmd(t, runBench, "", "--gemm", "own", "--suite", "step", "--small", "--quiet", "--json"); err == nil || !strings.Contains(err.Error(), "one GEMM") {
		t.Errorf("--gemm own on the cpu backend: %v, want it refused", err)
	}
	if _, err := runCmd(t, runBench, "", "--baseline", "x.json", "--json"); err == nil || !strings.Contains(err.Error(), "--json prints") {
		t.Errorf("--json - with --baseline: %v, want it refused", err)
	}
}

// TestBenchProfile checks that train bench profile tables the kernels of
// Nsight Compute's raw CSV pages, one case per file, with the samples of a
// source page after them, and names a file it cannot read.
func TestBenchProfile(t *testing.T) {
	dir := t.TempDir()
	csv := `"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
"","","","","","","","","","","","nsecond","%",""
"0","1","train","h","void attn_fwd_kernel<2>(FwdArgs)","1","7","(128, 1, 1)","(16, 32, 1)","0","9.0","250000","70.5","3.25"
`
	path := filepath.Join(dir, "attn-fwd.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, runBench, "", "profile", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| attn-fwd | `attn_fwd_kernel<2>` | (16, 32, 1) | (128, 1, 1) |", "| 250.0 | 70.5 |", "barrier 3.25"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	md := filepath.Join(dir, "profile.md")
	if _, err := runCmd(t, runBench, "", "profile", "--brief", "--out", md, path); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(md); err != nil || strings.TrimSpace(string(raw)) != "attn-fwd: 250 µs SM 70% stall barrier 3.2" {
		t.Errorf("--brief wrote %q (%v)", raw, err)
	}
	// A source page beside it: its samples by opcode follow the table, and
	// --brief gives it a line.
	sass := filepath.Join(dir, "attn-fwd.sass.csv")
	page := `"Kernel Name","void attn_fwd_kernel<2>(FwdArgs)"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_short_scoreboard"
"0000","HMMA.16816.F32.BF16 R4, R8, R12, R4 ;","75","100","60"
"0010","BAR.SYNC 0x0 ;","25","10","0"
`
	if err := os.WriteFile(sass, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, runBench, "", "profile", path, sass)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| attn-fwd | `attn_fwd_kernel<2>`", "## Where the warps wait", "### attn-fwd (`attn_fwd_kernel<2>`): 100 warp-state samples over 2 instructions",
		"| HMMA | tensor-core product", "| 1 | 75.0 | short_scoreboard 80% |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err = runCmd(t, runBench, "", "profile", "--brief", path, sass); err != nil || !strings.Contains(out, "attn-fwd: 250 µs") || !strings.Contains(out, "attn-fwd sampled at: HMMA 75% BAR 25%") {
		t.Errorf("--brief with a source page: %q (%v)", out, err)
	}
	bad := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(bad, []byte("==PROF== No kernels were profiled.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"profile", bad}, {"profile", filepath.Join(dir, "missing.csv")}} {
		if _, err := runCmd(t, runBench, "", args...); err == nil || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("train bench %v: error %v, want one naming the file", args, err)
		}
	}
	if _, err := runCmd(t, runBench, "", "profile"); err == nil {
		t.Error("no files: no error")
	}
}
