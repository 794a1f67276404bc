package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestDemoMiniature runs the whole demo at a miniature scale: every phase
// runs or says why it was skipped, the table has a row per method and
// results.json holds them.
func TestDemoMiniature(t *testing.T) {
	dir := t.TempDir()
	out, err := runCmd(t, runDemo, "", "--out", dir, "--threads", "2", "--sft-tasks", "40", "--sft-steps", "4",
		"--rl-tasks", "3", "--k", "2", "--test-tasks", "3", "--eval-seeds", "1", "--candidates", "2", "--data-fraction", "0.5")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[1/8", "[8/8", "supervised start: 40 scripted dialogues", "rollouts: 6 episodes (3 tasks × 2)",
		"SFT start", "rejection fine-tuning", "multi-turn DPO", "SWEET-RL", "95% confidence intervals over 3 tasks"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res []demoResult
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 4 {
		t.Fatalf("results.json: %d rows, %v\n%s", len(res), err, raw)
	}
	for _, r := range res {
		if (r.Summary == nil) == (r.Skipped == "") {
			t.Errorf("%s: want either a summary or a reason it was skipped: %+v", r.Method, r)
		}
		if r.Summary != nil && r.Summary.Episodes != 3 {
			t.Errorf("%s: %d episodes, want 3", r.Method, r.Summary.Episodes)
		}
	}
	if res[0].Summary == nil {
		t.Error("the SFT start is always evaluated")
	}
	if _, err := runCmd(t, runDemo, "", "--out", dir, "--critic-head", "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("--critic-head nope: %v", err)
	}
	for _, f := range []string{"sft/config.json", "sft/model.safetensors", "rollouts.jsonl.zst", "eval-0.jsonl.zst"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the demo did not write %s: %v", f, err)
		}
	}
}

func TestCriticCheck(t *testing.T) {
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), builtinConfig, engine.F32, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	head, err := rl.NewValueHead(m)
	if err != nil {
		t.Fatal(err)
	}
	pol := &rl.Sampler{Model: m, Tok: tokenizer.Bytes{}}
	for _, c := range []struct {
		critic rl.Critic
		how    string
	}{{rl.Critic{Model: m, Baseline: rl.BaselinePolicy}, "critic's mean log-prob − policy's"}, {rl.Critic{Model: m, Head: head}, "the value head's value"}} {
		var out strings.Builder
		if err := criticCheck(context.Background(), c.critic, pol, demotask.Tasks(3, 4), &out); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, want := range []string{"critic check on 3 held-out tasks", c.how, "ask a key over answering", "answer right over asking again", "answer right over a wrong answer"} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if strings.Count(got, "% of tasks") != 3 {
			t.Errorf("want three checks:\n%s", got)
		}
	}
}
