package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/llama"
)

// runCmd runs a subcommand with args and stdin and returns its output.
func runCmd(t *testing.T, run func([]string, io.Reader, io.Writer, io.Writer) error, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

func TestInfoAndPlan(t *testing.T) {
	out, err := runCmd(t, runInfo, "", "--preset", "llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"parameters: 8030261248", "16.06 GB in bf16", "LoRA r=16 on q,k,v,o,gate,up,down: 41943040"} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCmd(t, runPlan, "", "--preset", "llama-3.1-8b", "--seq", "8192", "--lora-rank", "16", "--recompute")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LoRA r=16, 1 × 8192 tokens, bf16 weights, recomputation", "layer activations", "logits chunk *", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{
		{"--preset", "nope"},
		{},
		{"--preset", "tiny", "--gguf", "x.gguf"},
		{"--preset", "tiny", "--lora-rank", "8", "--lora-targets", "qkv"},
		{"--gguf", "/nonexistent/model.gguf"},
		{"--preset", "tiny", "--dtype", "i32"},
		{"--preset", "tiny", "--lora-rank", "-1"},
	} {
		if _, err := runCmd(t, runPlan, "", bad...); err == nil {
			t.Errorf("plan %q succeeded", bad)
		}
	}
}

func TestGenerateStories260K(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	out, err := runCmd(t, runGenerate, "", "--gguf", path, "--bos-only", "--max-new", "40")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "Once upon a time, there was a little girl named Lily.") {
		t.Errorf("greedy generation from BOS: %q", out)
	}
	// The continuation of a prompt keeps its leading space, as serve's does.
	out, err = runCmd(t, runGenerate, "", "--gguf", path, "--prompt", "Once upon a time, there was a", "--max-new", "5")
	if err != nil || out != " little girl named\n" {
		t.Errorf("the continuation of a prompt: %q (%v), want %q", out, err, " little girl named\n")
	}
	out, err = runCmd(t, runGenerate, "", "--gguf", path, "--prompt", "Once upon a time", "--max-new", "8",
		"--temperature", "1", "--top-p", "0.9", "--seed", "5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		IDs      []int32   `json:"ids"`
		LogProbs []float32 `json:"logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil || len(g.IDs) != 8 || len(g.LogProbs) != 8 {
		t.Fatalf("--json output %q: %v", out, err)
	}
	for _, lp := range g.LogProbs {
		if !(lp <= 0) {
			t.Errorf("log-probability %g", lp)
		}
	}
	out2, _ := runCmd(t, runGenerate, "", "--gguf", path, "--prompt", "Once upon a time", "--max-new", "8",
		"--temperature", "1", "--top-p", "0.9", "--seed", "5", "--json")
	if out2 != out {
		t.Errorf("the same seed sampled differently:\n%s\n%s", out, out2)
	}
}

func TestScore(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	out, err := runCmd(t, runScore, "{\"text\": \"Once upon a time\"}\n\n{\"ids\": [1, 403, 407]}\n", "--gguf", path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("score printed %d lines:\n%s", len(lines), out)
	}
	var first, second struct {
		LogProbs []float64 `json:"logprobs"`
		Mean     float64   `json:"mean"`
	}
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	// The second sequence is a prefix of the first: the same tokens must score
	// the same.
	if len(second.LogProbs) != 2 || len(first.LogProbs) < 2 ||
		abs(first.LogProbs[0]-second.LogProbs[0]) > 1e-5 || abs(first.LogProbs[1]-second.LogProbs[1]) > 1e-5 {
		t.Errorf("prefix scores differ: %v vs %v", first.LogProbs, second.LogProbs)
	}
	if _, err := runCmd(t, runScore, "{\"ids\": [1, 403]}\n{bad\n", "--gguf", path); err == nil || !strings.Contains(err.Error(), "standard input:2") {
		t.Errorf("a malformed line gave %v, want an error naming line 2", err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestScoreWithAdapter saves a PEFT adapter for the "tiny" preset and checks
// that "train score --adapter" scores under it: the same numbers as the
// library, and different ones from the base model.
func TestScoreWithAdapter(t *testing.T) {
	c, err := llama.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{})
	m, err := llama.NewRandom(b, c, engine.F32, 0.02, 1) // what --preset tiny --seed 1 builds
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ad.Each(func(name string, w *engine.Tensor) {
		if strings.HasSuffix(name, "lora_B.weight") {
			vals := make([]float32, w.Numel())
			for i := range vals {
				vals[i] = float32(i%7) * 0.05
			}
			engine.SetF32(b, w, vals)
		}
	})
	dir := t.TempDir()
	if err := m.SavePEFT(ad, dir); err != nil {
		t.Fatal(err)
	}
	ids := []int32{1, 20, 300, 41, 5, 77}
	p, err := m.ForwardTrain(llama.Batch{IDs: ids[:5], Targets: ids[1:], Lens: []int{5}}, ad)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ToF32(b, p.LogP)
	p.Release()

	score := func(args ...string) []float64 {
		out, err := runCmd(t, runScore, `{"ids": [1, 20, 300, 41, 5, 77]}`, append([]string{"--preset", "tiny"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			LogProbs []float64 `json:"logprobs"`
		}
		if err := json.Unmarshal([]byte(out), &rec); err != nil {
			t.Fatal(err)
		}
		return rec.LogProbs
	}
	with, without := score("--adapter", dir), score()
	differs := false
	for i := range want {
		if abs(with[i]-float64(want[i])) > 1e-6 {
			t.Errorf("logprob %d with --adapter: %v, library: %v", i, with[i], want[i])
		}
		differs = differs || with[i] != without[i]
	}
	if !differs {
		t.Error("the adapter changed no score")
	}
	if _, err := runCmd(t, runScore, `{"ids": [1, 2]}`, "--preset", "tiny", "--adapter", t.TempDir()); err == nil {
		t.Error("an empty adapter directory was accepted")
	}
}

// TestPlanZeRO1Llama8B checks train plan's verdict on full fine-tuning of
// Llama-3.1-8B (bf16 weights, one sequence of 8192 tokens, recomputation)
// on 8 GPUs of 80 GB: each rank fits with --zero 1, and not without.
func TestPlanZeRO1Llama8B(t *testing.T) {
	const gpu = 80e9
	for _, c := range []struct {
		zero string
		fits bool
	}{{"0", false}, {"1", true}} {
		out, err := runCmd(t, runPlan, "", "--preset", "llama-3.1-8b", "--seq", "8192", "--recompute", "--ranks", "8", "--zero", c.zero, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			llama.Plan
			Ranks int `json:"ranks"`
			Zero  int `json:"zero"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("--zero %s: %v\n%s", c.zero, err, out)
		}
		if fits := p.Total <= gpu; fits != c.fits || p.Ranks != 8 || p.Zero != int(c.zero[0]-'0') {
			t.Errorf("--zero %s: %.2f GB per rank (ranks %d, zero %d); fits 80 GB: %v, want %v", c.zero, float64(p.Total)/1e9, p.Ranks, p.Zero, fits, c.fits)
		}
	}
	for _, bad := range [][]string{{"--ranks", "0"}, {"--zero", "2"}, {"--zero", "-1"}} {
		if _, err := runCmd(t, runPlan, "", append([]string{"--preset", "tiny"}, bad...)...); err == nil {
			t.Errorf("plan %q succeeded", bad)
		}
	}
}
