package peers

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/kernelbench"
	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/bench/stepbench"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
)

// script runs torch_peers.py with args and returns its standard output.
func script(t *testing.T, args ...string) []byte {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the peer script cannot be checked")
	}
	out, err := exec.Command(py, append([]string{"torch_peers.py"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("torch_peers.py %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// TestNamesAndCounts checks that the peer names its results as we name ours
// and counts a step's FLOPs as we do, so that reports pair them.
func TestNamesAndCounts(t *testing.T) {
	var d struct {
		Attention  []string
		Steps      map[string]float64
		Generation []string
		Copies     map[string]int
	}
	if err := json.Unmarshal(script(t, "--describe"), &d); err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, c := range []opbench.Config{opbench.Llama8B2K, opbench.Llama8B8K} {
		for _, k := range opbench.AttentionCases(c, engine.BF16) {
			ours = append(ours, k.Name)
		}
	}
	if strings.Join(ours, " ") != strings.Join(d.Attention, " ") {
		t.Errorf("attention names:\n ours %v\npeer's %v", ours, d.Attention)
	}
	c, err := llama.Preset("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int{2048, 8192} {
		for _, rc := range []bool{false, true} {
			name := stepbench.StepName("llama-3.1-8b", seq, 16, rc)
			want, _ := stepbench.FLOPsPerToken(c, 16, seq)
			if got, ok := d.Steps[name]; !ok || got != want {
				t.Errorf("step %s: the peer counts %v FLOPs per token (present %v), we count %v", name, got, ok, want)
			}
		}
	}
	var gens []string
	for _, b := range []int{1, 16} {
		gens = append(gens, stepbench.GenerationName("prefill", "llama-3.1-8b", b, 512, 64), stepbench.GenerationName("decode", "llama-3.1-8b", b, 512, 64))
	}
	if strings.Join(gens, " ") != strings.Join(d.Generation, " ") {
		t.Errorf("generation names:\n ours %v\npeer's %v", gens, d.Generation)
	}
	for _, n := range []int64{1 << 30, 60 << 20, 10 << 20, 1024} {
		if got, want := d.Copies[jsonInt(n)], kernelbench.Copies(n, 50<<20); got != want {
			t.Errorf("copies of %d bytes: peer %d, ours %d", n, got, want)
		}
	}
}

func jsonInt(n int64) string {
	raw, _ := json.Marshal(n)
	return string(raw)
}

// TestSelftestParses checks that a result written by the peer's writers
// (made-up timings) passes our strict reader, figures included.
func TestSelftestParses(t *testing.T) {
	r, err := bench.Parse(script(t, "--selftest", "--model", "tiny"))
	if err != nil {
		t.Fatalf("the peer's result does not parse: %v", err)
	}
	if len(r.Kernels) != 2 || len(r.Steps) != 2 || len(r.Generation) != 2 || r.Ceilings.GEMM == nil {
		t.Fatalf("parsed %+v", r)
	}
	k := r.Kernels[0]
	if k.Median != 1e-5 || k.TFLOPs != k.FLOPs/1e-5/1e12 || k.Impl != bench.TorchSDPA {
		t.Errorf("kernel %+v", k)
	}
	s := r.Steps[0]
	if s.TokensPerS != 64/0.11 || s.Impl != bench.TorchPEFT || s.PeakBytes != 1<<20 {
		t.Errorf("step %+v", s)
	}
	if g := r.Generation[0]; g.TokensPerS != 16/0.015 || g.Impl != bench.TorchHF {
		t.Errorf("generation %+v", g)
	}
}

// TestSkipsWithoutTorch checks the line and the result the peer writes where
// PyTorch is missing.
func TestSkipsWithoutTorch(t *testing.T) {
	if exec.Command("python3", "-c", "import torch").Run() == nil {
		t.Skip("PyTorch is importable here")
	}
	path := filepath.Join(t.TempDir(), "peer.json")
	script(t, "--json", path)
	r, err := bench.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Meta.Skipped, "PyTorch is not importable") || len(r.Kernels) != 0 {
		t.Errorf("meta %+v", r.Meta)
	}
}

// TestDriverVersion: the peer reads the driver's version from
// /proc/driver/nvidia/version in both of its forms, as train bench does.
func TestDriverVersion(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:38 UTC 2025", "580.65.06"},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)", "580.159.04"},
		{"NVRM version: nothing to see", ""},
	} {
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 not found: the peer script cannot be checked")
		}
		cmd := exec.Command(py, "-B", "-c", "import sys, torch_peers; print(torch_peers.parse_driver_version(sys.argv[1]))", c.text)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("parse_driver_version(%q): %v", c.text, err)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("parse_driver_version(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
