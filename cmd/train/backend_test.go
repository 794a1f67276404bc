package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/model/llama"
)

// TestBackendFlagsEverywhere checks that every subcommand that runs a model
// takes --backend, --gemm, --attention-config and --threads, and that
// exactly the trainers take
// --recompute.
func TestBackendFlagsEverywhere(t *testing.T) {
	for _, c := range []struct {
		name     string
		training bool
	}{
		{"generate", false}, {"score", false}, {"rollout", false}, {"eval", false},
		{"sft", true}, {"critic", true}, {"actor", true}, {"rft", true}, {"mtdpo", true}, {"demo", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, usage bytes.Buffer
			err := commands()[c.name].run([]string{"--help"}, strings.NewReader(""), &out, &usage)
			if !errors.Is(err, pflag.ErrHelp) {
				t.Fatalf("--help: %v", err)
			}
			for _, f := range []string{"--backend", "--gemm", "--attention-config", "--threads"} {
				if !strings.Contains(usage.String(), f) {
					t.Errorf("no %s flag:\n%s", f, usage.String())
				}
			}
			if got := strings.Contains(usage.String(), "--recompute"); got != c.training {
				t.Errorf("--recompute offered: %v, want %v", got, c.training)
			}
		})
	}
}

// TestBackendFlagErrors checks that wrong backend flags stop a run with an
// error naming the flag.
func TestBackendFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gemm", "own"}, "--gemm own: the cpu backend has one GEMM"},
		{[]string{"--gemm", "cublas"}, "--gemm cublas: the cpu backend"},
		{[]string{"--backend", "cuda", "--gemm", "fast"}, `unknown --gemm "fast"`},
		{[]string{"--backend", "tpu"}, `unknown --backend "tpu"`},
		{[]string{"--attention-config", "fwd.rows=64"}, "--attention-config fwd.rows=64: the cpu backend has no attention tiles"},
	} {
		args := append([]string{"--preset", "tiny", "--bos-only", "--max-new", "1"}, c.args...)
		_, err := runCmd(t, runGenerate, "", args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("generate %q: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestRecomputeReachesModel checks that --recompute sets the loaded model's
// Recompute, for sft's flags and for the trajectory trainers'.
func TestRecomputeReachesModel(t *testing.T) {
	for _, recompute := range []bool{false, true} {
		args := []string{"--preset", "tiny"}
		if recompute {
			args = append(args, "--recompute")
		}
		fs := newFlags("sft", io.Discard)
		var mf modelFlags
		mf.register(fs)
		mf.registerRecompute(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		m, err := mf.loadBase()
		if err != nil {
			t.Fatal(err)
		}
		if m.Recompute != recompute {
			t.Errorf("sft flags %q: model Recompute %v", args, m.Recompute)
		}
		j := newTrajJob("rft", io.Discard, 1, -1, false, "", "")
		if err := j.fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if m, err = j.pf.loadBase(); err != nil {
			t.Fatal(err)
		}
		if m.Recompute != recompute {
			t.Errorf("rft flags %q: model Recompute %v", args, m.Recompute)
		}
	}
}

// TestPlanJSON checks train plan --json: its documented fields, and the
// same items and total as the library's plan.
func TestPlanJSON(t *testing.T) {
	out, err := runCmd(t, runPlan, "", "--preset", "llama-3.1-8b", "--seq", "4096", "--batch", "2", "--lora-rank", "16", "--recompute", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model struct {
			Dim, Layers, Vocab int
			KVHeads            int `json:"kv_heads"`
		} `json:"model"`
		Mode        string `json:"mode"`
		LoRARank    int    `json:"lora_rank"`
		Batch, Seq  int
		WeightDType string `json:"weight_dtype"`
		Recompute   bool   `json:"recompute"`
		Items       []llama.PlanItem
		Total       int64 `json:"total_bytes"`
		Pooled      int64 `json:"pooled_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	c, _ := llama.Preset("llama-3.1-8b")
	want, err := c.Plan(llama.PlanOptions{Batch: 2, SeqLen: 4096, WeightBytes: 2, Recompute: true,
		LoRA: &llama.LoRAConfig{Rank: 16, Targets: llama.AllProjections}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Model.Dim != 4096 || got.Model.Layers != 32 || got.Model.Vocab != 128256 || got.Model.KVHeads != 8 ||
		got.Mode != "lora" || got.LoRARank != 16 || got.Batch != 2 || got.Seq != 4096 || got.WeightDType != "bf16" || !got.Recompute {
		t.Errorf("header fields: %+v", got)
	}
	if got.Total != want.Total || got.Pooled != want.Pooled || len(got.Items) != len(want.Items) {
		t.Fatalf("total %d, pooled %d, %d items; want %d, %d, %d", got.Total, got.Pooled, len(got.Items), want.Total, want.Pooled, len(want.Items))
	}
	for i, it := range got.Items {
		if it != want.Items[i] {
			t.Errorf("item %d: %+v, want %+v", i, it, want.Items[i])
		}
	}
}
