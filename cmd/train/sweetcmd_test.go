package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
)

// byteModel writes a small random byte-level model as a Hugging Face
// checkpoint and returns its directory.
func byteModel(t *testing.T) string {
	t.Helper()
	c := builtinConfig
	c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN = 32, 1, 2, 1, 16, 64
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.SaveHF(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSweetRLCommands runs each step of the pipeline from files, on the
// demo family with a tiny random model: rollout, then critic, actor and the
// baselines on scripted trajectories (which have successes to pair), then
// eval of the actor.
func TestSweetRLCommands(t *testing.T) {
	dir := t.TempDir()
	model := byteModel(t)
	common := []string{"--hf", model, "--threads", "1"}
	roll := filepath.Join(dir, "roll.jsonl.zst")
	out, err := runCmd(t, runRollout, "", append(common, "--env", "demo", "--demo-tasks", "3", "--k", "2", "--max-new", "6", "--out", roll)...)
	if err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	trajs, err := sweetrl.LoadTrajectories(roll)
	if err != nil || len(trajs) != 6 {
		t.Fatalf("rollout wrote %d trajectories (%v)", len(trajs), err)
	}
	if !strings.Contains(out, "6 episodes (3 tasks × 2)") || !strings.Contains(out, "mean reward") {
		t.Errorf("rollout output:\n%s", out)
	}

	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	train := append(common, "--trajectories", scripted, "--lora-rank", "2", "--batch-tokens", "2048", "--lr", "1e-3")
	critic := filepath.Join(dir, "critic")
	if out, err := runCmd(t, runCritic, "", append(train, "--out", critic, "--epochs", "1")...); err != nil || !strings.Contains(out, "pair accuracy") {
		t.Fatalf("critic: %v\n%s", err, out)
	}
	if !exists(filepath.Join(critic, "adapter_model.safetensors")) {
		t.Fatal("critic: no adapter written")
	}
	scalar := filepath.Join(dir, "scalar")
	if out, err := runCmd(t, runCritic, "", append(train, "--out", scalar, "--epochs", "1", "--head", "scalar")...); err != nil || !strings.Contains(out, "scalar head") {
		t.Fatalf("critic --head scalar: %v\n%s", err, out)
	}
	out, err = runCmd(t, runActor, "", append(train, "--env", "demo", "--critic", scalar, "--candidates", "3", "--data-fraction", "0.1", "--max-new", "4", "--out", filepath.Join(dir, "actor-scalar"))...)
	if err != nil || !strings.Contains(out, "ranked by its value") {
		t.Fatalf("actor with a scalar critic: %v\n%s", err, out)
	}
	actor := filepath.Join(dir, "actor")
	out, err = runCmd(t, runActor, "", append(train, "--env", "demo", "--critic", critic, "--candidates", "4", "--data-fraction", "0.2", "--max-new", "6", "--out", actor)...)
	if err != nil || !strings.Contains(out, "turn-wise DPO") {
		t.Fatalf("actor: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		run  func([]string, io.Reader, io.Writer, io.Writer) error
	}{{"rft", runRFT}, {"mtdpo", runMTDPO}} {
		if out, err := runCmd(t, c.run, "", append(train, "--env", "demo", "--out", filepath.Join(dir, c.name))...); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		if !exists(filepath.Join(dir, c.name, "adapter_config.json")) {
			t.Errorf("%s: no adapter written", c.name)
		}
		if cfg, err := os.ReadFile(filepath.Join(dir, c.name, "config.yaml")); err != nil || !strings.Contains(string(cfg), `lr: "0.001"`) {
			t.Errorf("%s: the run's flags were not recorded beside it: %v\n%s", c.name, err, cfg)
		}
	}
	pref := []string{"pair_acc", "margin", "chosen_logratio", "rejected_logratio", "kl"}
	checkStageMetrics(t, critic, pref...)
	checkStageMetrics(t, actor, pref...)
	checkStageMetrics(t, filepath.Join(dir, "mtdpo"), pref...)
	checkStageMetrics(t, scalar, "pair_acc", "margin")
	checkStageMetrics(t, filepath.Join(dir, "rft"), "grad_norm")
	out, err = runCmd(t, runEval, "", append(common, "--env", "demo", "--demo-tasks", "2", "--max-new", "4", "--simulator", "model", "--sim-hf", model, "--sim-max-new", "3")...)
	if err != nil || !strings.Contains(out, "(2 tasks, 2 episodes)") {
		t.Fatalf("eval with a model simulator: %v\n%s", err, out)
	}
	if _, err := runCmd(t, runEval, "", append(common, "--env", "demo", "--simulator", "model", "--sim-hf", dir+"/nowhere")...); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("a missing simulator model gave %v", err)
	}
	eps := filepath.Join(dir, "eval.jsonl")
	out, err = runCmd(t, runEval, "", append(common, "--adapter", actor, "--env", "demo", "--demo-tasks", "3", "--seeds", "2", "--max-new", "6", "--out", eps)...)
	if err != nil || !strings.Contains(out, "(3 tasks, 6 episodes)") {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if got, err := sweetrl.LoadTrajectories(eps); err != nil || len(got) != 6 {
		t.Errorf("eval wrote %d episodes (%v)", len(got), err)
	}

	// ColBench: tasks from a file, answers scored by the sandboxed Python
	// evaluator, the human played by an OpenAI-compatible server.
	tasks := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(tasks, []byte(`{"problem_description": "add? def f(a, b):", "hidden_information": "def f(a, b):\n    return a + b", "ground_truth": "def f(a, b):\n    return a + b", "test_cases": {"test1": "f(1, 2)", "test2": "f(3, 4)"}}
`), 0o644)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, `{"choices": [{"message": {"role": "assistant", "content": "Just add them."}}]}`)
	}))
	defer srv.Close()
	cb := filepath.Join(dir, "colbench.jsonl")
	out, err = runCmd(t, runRollout, "", append(common, "--tasks", tasks, "--k", "2", "--max-new", "4", "--simulator", "http", "--sim-url", srv.URL+"/v1", "--out", cb)...)
	if err != nil {
		t.Fatalf("colbench rollout: %v\n%s", err, out)
	}
	if !strings.Contains(out, "scoring with Python 3.") || !strings.Contains(out, "reference") {
		t.Errorf("the rollout does not say which Python scores answers, and how:\n%s", out)
	}
	got, err := sweetrl.LoadTrajectories(cb)
	if err != nil || len(got) != 2 {
		t.Fatalf("colbench rollout wrote %d trajectories (%v)", len(got), err)
	}
	if got[0].Task.TestCases[1].Call != "f(3, 4)" || len(got[0].DialogueHistory) < 2 {
		t.Errorf("trajectory %+v", got[0])
	}
	if calls.Load() == 0 && len(got[0].DialogueHistory) > 2 {
		t.Error("the HTTP simulator was never called")
	}

	// Errors name what is wrong.
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"task\": {}, \"dialogue_history\": [], \"answer\": \"\", \"reward\": 0}\n{nope\n"), 0o644)
	for _, tc := range []struct {
		name string
		run  func([]string, io.Reader, io.Writer, io.Writer) error
		args []string
		want string
	}{
		{"malformed trajectories", runCritic, append(common, "--trajectories", bad, "--out", dir+"/x"), "bad.jsonl:2"},
		{"missing trajectories", runMTDPO, append(common, "--trajectories", dir+"/none.jsonl", "--out", dir+"/x"), "none.jsonl"},
		{"no critic", runActor, append(common, "--trajectories", scripted, "--out", dir+"/x"), "--critic"},
		{"colbench without tasks", runEval, append(common, "--env", "colbench"), "--tasks"},
		{"unknown env", runRollout, append(common, "--env", "nope", "--out", dir+"/x.jsonl"), "nope"},
		{"unknown simulator", runEval, append(common, "--env", "demo", "--simulator", "oracle"), "oracle"},
	} {
		if _, err := runCmd(t, tc.run, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// exists says whether path exists.
func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestRecipes applies each recipe of the repository's recipes/ to its
// subcommand: every key must be one of its flags and every value one the
// flag accepts, so that the command goes on to ask for its inputs.
func TestRecipes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("lr: 2e-7\nlearning-rate: 1\n"), 0o644)
	tests := []struct {
		path string
		run  func([]string, io.Reader, io.Writer, io.Writer) error
		want string // what the command asks for once its flags are set
	}{
		{"../../recipes/colbench-8b-critic.yaml", runCritic, "--out"},
		{"../../recipes/colbench-8b-actor.yaml", runActor, "--critic"},
		{"../../recipes/colbench-8b-mtdpo.yaml", runMTDPO, "--out"},
		{"../../recipes/colbench-8b-rft.yaml", runRFT, "--out"},
		{"../../recipes/llama3.1-8b-sft-full.yaml", runSFT, "no-such-model"},
		{"../../recipes/llama3.1-8b-sft-lora.yaml", runSFT, "no-such-model"},
		{bad, runCritic, `bad.yaml:2: unknown key "learning-rate"`},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			args := []string{"--config", tc.path}
			if tc.want == "no-such-model" {
				// sft trains its built-in model when none is named: name
				// one that is not there, which it asks for once its flags
				// are set.
				args = append(args, "--hf", filepath.Join(t.TempDir(), "no-such-model"))
			}
			_, err := runCmd(t, tc.run, "", args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("with %s and no inputs: %v; want an error naming %s", tc.path, err, tc.want)
			}
		})
	}
}
