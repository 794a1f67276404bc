package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
)

var miniDemo = []string{"--threads", "2", "--sft-tasks", "40", "--sft-steps", "4", "--rl-tasks", "5", "--val-tasks", "2",
	"--k", "2", "--test-tasks", "3", "--eval-seeds", "1", "--val-seeds", "1", "--check-tasks", "2", "--candidates", "2",
	"--data-fraction", "0.5", "--critic-epochs", "1"}

// TestDemoMiniature runs the demo command at a miniature scale: every phase
// runs or says why it was skipped, the table has a row per method and
// results.json holds them; bad flags are refused.
func TestDemoMiniature(t *testing.T) {
	dir := t.TempDir()
	out, err := runCmd(t, runDemo, "", append([]string{"--out", dir}, miniDemo...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[1 ", "supervised start: 40 scripted dialogues of the keys family", "rollouts: 10 episodes (5 tasks × 2)",
		"validation split: 2 of the 5 RL tasks", "SFT start", "rejection fine-tuning", "multi-turn DPO", "SWEET-RL (paper's score)",
		"95% confidence intervals over 3 tasks"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var res pipeline.Result
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "results.json")), &res); err != nil || len(res.Rows) != 4 {
		t.Fatalf("results.json: %d rows, %v", len(res.Rows), err)
	}
	if res.Rows[0].Summary == nil {
		t.Error("the SFT start is always evaluated")
	}
	for _, f := range []string{"sft/config.json", "sft/model.safetensors", "rollouts.jsonl.zst", "eval-0.jsonl.zst", "stages.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the demo did not write %s: %v", f, err)
		}
	}
	for _, bad := range [][]string{{"--critic-score", "nope"}, {"--advantage-baseline", "nope"}, {"--nll-scope", "nope"}, {"--critic-select", "nope"}, {"--family", "nope"}} {
		if _, err := runCmd(t, runDemo, "", append([]string{"--out", dir}, bad...)...); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%v: %v", bad, err)
		}
	}

	// train critic-check on any critic over the run's model.
	m, err := llama.LoadHF(cpu.New(cpu.Options{Threads: 1}), filepath.Join(dir, "sft"), engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAEvery(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	critic := filepath.Join(t.TempDir(), "critic")
	if err := m.SavePEFT(ad, critic); err != nil {
		t.Fatal(err)
	}
	for _, bl := range []string{"reference", "policy"} {
		out, err = runCmd(t, runCriticCheck, "", "--from", dir, "--critic", critic, "--test-tasks", "3", "--check-tasks", "2", "--advantage-baseline", bl)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "critic check on 2 held-out keys tasks") || strings.Count(out, "% of tasks") != 3 {
			t.Errorf("critic-check output:\n%s", out)
		}
	}
	if _, err := runCmd(t, runCriticCheck, "", "--from", t.TempDir()); err == nil || !strings.Contains(err.Error(), "stages.json") {
		t.Errorf("critic-check of a directory with no run: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDemoEpochSelectFlag checks --epoch-select: train demo alone
// registers it, --full turns it on unless it is given, and the run
// records it in results.json.
func TestDemoEpochSelectFlag(t *testing.T) {
	cmds := commands()
	for name := range cmds {
		has := false
		for _, f := range subcommandFlags(cmds, name) {
			has = has || f.Name == "epoch-select"
		}
		if has != (name == "demo") {
			t.Errorf("train %s registers --epoch-select: %v, want it in train demo alone", name, has)
		}
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--epoch-select"}, true},
		{[]string{"--full"}, true},
		{[]string{"--full", "--epoch-select=false"}, false},
	} {
		dir := t.TempDir()
		args := append(append([]string{"--out", dir, "--stages", "sft"}, miniDemo...), tc.args...)
		if out, err := runCmd(t, runDemo, "", args...); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		var res pipeline.Result
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, pipeline.ResultsFile)), &res); err != nil {
			t.Fatal(err)
		}
		if res.EpochSelect != tc.want || !strings.Contains(string(mustRead(t, filepath.Join(dir, pipeline.ResultsFile))), `"epoch_select"`) {
			t.Errorf("train demo %v: results.json records epoch_select %v, want %v", tc.args, res.EpochSelect, tc.want)
		}
	}
}
