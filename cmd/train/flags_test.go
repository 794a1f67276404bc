package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// runFunc is a subcommand's implementation (command.run).
type runFunc = func(args []string, stdin io.Reader, stdout, stderr io.Writer) error

// scriptedTrajectories writes scripted trajectories of the demo family,
// which have successes to pair, into dir and returns the file.
func scriptedTrajectories(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(path, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoRATargetsFlag checks that every LoRA training command takes
// --lora-targets and refuses an unknown name, naming it, before any model
// loads (the model flags name nothing that exists), and that train sft and
// train critic write the chosen projections into adapter_config.json.
func TestLoRATargetsFlag(t *testing.T) {
	for name, run := range map[string]runFunc{"sft": runSFT, "critic": runCritic, "actor": runActor, "mtdpo": runMTDPO, "rft": runRFT, "demo": runDemo, "plan": runPlan} {
		args := []string{"--hf", "nowhere", "--lora-rank", "2", "--lora-targets", "q,wq"}
		if name == "demo" {
			args = args[2:]
		}
		_, err := runCmd(t, run, "", args...)
		if err == nil || !strings.Contains(err.Error(), `unknown LoRA target "wq"`) {
			t.Errorf("train %s --lora-targets q,wq: %v; want it refused naming wq", name, err)
		}
	}
	if _, err := runCmd(t, runSFT, "", "--hf", "nowhere", "--lora-targets", "q"); err == nil || !strings.Contains(err.Error(), "--lora-rank") {
		t.Errorf("sft --lora-targets without --lora-rank: %v; want it refused", err)
	}

	model := byteModel(t)
	dir := t.TempDir()
	sft := filepath.Join(dir, "sft")
	if out, err := runCmd(t, runSFT, "", "--out", sft, "--hf", model, "--lora-rank", "2", "--lora-targets", "v_proj,q,down", "--steps", "1",
		"--batch-tokens", "128", "--prompt", "", "--threads", "1"); err != nil {
		t.Fatalf("sft: %v\n%s", err, out)
	}
	wantModules(t, filepath.Join(sft, "final"), []string{"q_proj", "v_proj", "down_proj"})

	scripted := scriptedTrajectories(t, dir)
	critic := filepath.Join(dir, "critic")
	if out, err := runCmd(t, runCritic, "", "--hf", model, "--threads", "1", "--trajectories", scripted, "--lora-rank", "2", "--lora-targets", "k,up",
		"--batch-tokens", "2048", "--epochs", "1", "--out", critic); err != nil || !strings.Contains(out, "LoRA r=2 on k,up") {
		t.Fatalf("critic: %v\n%s", err, out)
	}
	wantModules(t, critic, []string{"k_proj", "up_proj"})
}

// wantModules checks the target_modules of the adapter in dir.
func wantModules(t *testing.T, dir string, want []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		TargetModules []string `json:"target_modules"`
	}
	if err := json.Unmarshal(raw, &pc); err != nil || !slices.Equal(pc.TargetModules, want) {
		t.Errorf("%s: target_modules %v (%v), want %v", dir, pc.TargetModules, err, want)
	}
}

// helpFlags returns the flags train NAME --help lists.
func helpFlags(t *testing.T, name string) map[string]bool {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{name, "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("train %s --help: exit status %d\n%s", name, code, errOut.String())
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(out.String()+errOut.String(), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "--") {
			flags[strings.TrimPrefix(f[0], "--")] = true
		} else if len(f) > 1 && strings.HasPrefix(f[0], "-") && strings.HasPrefix(f[1], "--") { // "-o, --output"
			flags[strings.TrimPrefix(f[1], "--")] = true
		}
	}
	if len(flags) == 0 {
		t.Fatalf("train %s --help lists no flags:\n%s%s", name, out.String(), errOut.String())
	}
	return flags
}

// TestFlagsUsed checks that each subcommand lists the flags it reads and
// not those it never reads: the trainers on a trajectory file play no
// episodes, so they have no simulator, task or scorer flags; rft trains
// no preference loss; deprecated spellings are hidden.
func TestFlagsUsed(t *testing.T) {
	simulator := []string{"simulator", "sim-url", "sim-model", "sim-key-env", "sim-timeout", "sim-retries", "sim-hf", "sim-max-new", "sim-workers", "sim-max-failures"}
	tasks := []string{"tasks", "limit", "demo-tasks", "demo-first", "demo-seed", "python", "workers", "stdlib-only", "module-scope", "render-tabs", "render-timeout"}
	episodes := append(append([]string{}, simulator...), tasks...)
	training := []string{"lr", "epochs", "warmup", "min-lr-ratio", "weight-decay", "clip", "lora-rank", "lora-targets", "full", "recompute", "out", "trajectories", "env",
		"checkpoint-every", "keep", "resume", "force"}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	tests := []struct {
		name                string
		required, forbidden []string
	}{
		{"critic", cat(training, []string{"beta", "batch", "losses", "head", "critic-score"}), cat(episodes, []string{"temperature", "top-k", "max-new", "nll", "candidates"})},
		{"actor", cat(training, []string{"beta", "batch", "losses", "nll", "temperature", "top-p", "top-k", "max-new", "critic", "candidates"}), episodes},
		{"mtdpo", cat(training, []string{"beta", "batch", "losses"}), cat(episodes, []string{"temperature", "max-new", "nll", "head"})},
		{"rft", training, cat(episodes, []string{"beta", "batch", "losses", "nll", "temperature", "max-new"})},
		{"rollout", cat(episodes, []string{"temperature", "top-p", "top-k", "max-new", "k", "out"}), []string{"lr", "epochs", "lora-rank", "lora-targets", "trajectories", "json"}},
		{"eval", cat(episodes, []string{"temperature", "top-p", "top-k", "max-new", "seeds", "out", "json", "clip-model", "against"}), []string{"lr", "epochs", "lora-rank", "lora-targets", "trajectories", "k"}},
		{"sft", []string{"out", "warmup", "lora-rank", "lora-targets", "steps", "data", "data-format"}, cat(episodes, []string{"run-dir", "trajectories", "env"})},
		{"demo", []string{"out", "lora-rank", "lora-targets", "check-tasks"}, cat(simulator, []string{"hf", "tasks"})},
		{"critic-check", []string{"from", "critic", "check-tasks"}, []string{"tasks", "lora-targets", "sim-url"}},
		{"plan", []string{"dtype", "json", "lora-rank", "lora-targets"}, []string{"weight-dtype", "threads", "backend", "sim-url"}},
		{"info", []string{"hf", "gguf", "preset"}, []string{"threads", "backend", "seed", "adapter"}},
		{"generate", []string{"temperature", "top-p", "top-k", "max-new", "json"}, cat(episodes, []string{"lora-rank", "lora-targets"})},
		{"serve", []string{"addr", "adapter", "max-batch"}, cat(episodes, []string{"lora-rank", "lora-targets", "temperature"})},
		{"score", []string{"input", "adapter"}, cat(episodes, []string{"temperature", "max-new", "lora-targets"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flags := helpFlags(t, tc.name)
			for _, f := range tc.required {
				if !flags[f] {
					t.Errorf("train %s --help lacks --%s, which it reads", tc.name, f)
				}
			}
			for _, f := range tc.forbidden {
				if flags[f] {
					t.Errorf("train %s --help lists --%s, which it never reads", tc.name, f)
				}
			}
		})
	}
}

// runCmdErr is runCmd with standard error returned too.
func runCmdErr(t *testing.T, run runFunc, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestDeprecatedSpellings checks that each renamed flag still works under
// its old spelling, with a one-line notice naming the new one, and does
// what the new spelling does.
func TestDeprecatedSpellings(t *testing.T) {
	want, _, err := runCmdErr(t, runPlan, "--preset", "tiny", "--dtype", "f32")
	if err != nil {
		t.Fatal(err)
	}
	got, notice, err := runCmdErr(t, runPlan, "--preset", "tiny", "--weight-dtype", "f32")
	if err != nil || got != want || !strings.Contains(notice, "--weight-dtype has been deprecated, use --dtype") {
		t.Errorf("plan --weight-dtype f32: %v, notice %q; output equal to --dtype f32's: %v", err, notice, got == want)
	}

	_, notice, err = runCmdErr(t, runBench, "--model", "tiny", "--suite", "nope")
	if err == nil || !strings.Contains(notice, "--model has been deprecated, use --preset") {
		t.Errorf("bench --model tiny: %v, notice %q; want it taken as --preset", err, notice)
	}

	_, notice, err = runCmdErr(t, runCriticCheck, "--tasks", "5")
	if err == nil || !strings.Contains(err.Error(), "--from") || !strings.Contains(notice, "use --check-tasks") {
		t.Errorf("critic-check --tasks 5: %v, notice %q; want it taken as --check-tasks", err, notice)
	}

	dir := filepath.Join(t.TempDir(), "old")
	out, notice, err := runCmdErr(t, runSFT, "--run-dir", dir, "--warmup", "1", "--steps", "2", "--batch-tokens", "128", "--eval-every", "0", "--prompt", "", "--threads", "1")
	if err != nil {
		t.Fatalf("sft --run-dir --warmup 1: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "final", "config.json")); err != nil {
		t.Errorf("sft --run-dir DIR wrote no model in DIR: %v", err)
	}
	for _, w := range []string{"--run-dir has been deprecated, use --out", "--warmup 1: a count of steps is deprecated"} {
		if !strings.Contains(notice, w) {
			t.Errorf("sft's standard error lacks %q:\n%s", w, notice)
		}
	}
	if lines := strings.Count(notice, "\n"); lines != 2 {
		t.Errorf("%d lines of notices, want one per deprecated spelling:\n%s", lines, notice)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil || strings.Contains(string(saved), "run-dir") || !strings.Contains(string(saved), "out: ") {
		t.Errorf("config.yaml (%v) records the deprecated spelling, or not the new one:\n%s", err, saved)
	}
}

// TestSimulatorStartAndFailures checks that rollout and eval refuse to
// start, naming the URL, when the HTTP simulator does not answer — before
// the model loads (the model flag names nothing that exists) — and that a
// run stops with an error once --sim-max-failures simulator calls failed.
func TestSimulatorStartAndFailures(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for name, run := range map[string]runFunc{"rollout": runRollout, "eval": runEval} {
		_, err := runCmd(t, run, "", "--hf", "nowhere", "--env", "demo", "--simulator", "http", "--sim-url", gone.URL+"/v1", "--out", filepath.Join(t.TempDir(), "r.jsonl"))
		if err == nil || !strings.Contains(err.Error(), gone.URL+"/v1/chat/completions") || !strings.Contains(err.Error(), "does not answer") {
			t.Errorf("%s against no simulator: %v; want an error naming its URL", name, err)
		}
	}

	// A simulator that answers the start-up check and fails every call
	// after it.
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices": [{"message": {"role": "assistant", "content": "ready"}}]}`)
			return
		}
		http.Error(w, "the simulator fell over", http.StatusInternalServerError)
	}))
	defer ts.Close()
	roll := filepath.Join(t.TempDir(), "roll.jsonl")
	out, err := runCmd(t, runRollout, "", "--hf", byteModel(t), "--threads", "1", "--env", "demo", "--demo-tasks", "3", "--k", "2", "--max-new", "4",
		"--simulator", "http", "--sim-url", ts.URL+"/v1", "--sim-retries", "0", "--sim-max-failures", "2", "--out", roll)
	if !errors.Is(err, sweetrl.ErrSimulatorFailing) || !strings.Contains(err.Error(), "fell over") {
		t.Fatalf("rollout against a failing simulator: %v; want it stopped by --sim-max-failures 2\n%s", err, out)
	}
	if n := calls.Load(); n > 1+2+8 {
		t.Errorf("%d simulator requests after the limit was reached", n)
	}
	if exists(roll) {
		t.Errorf("a stopped rollout wrote %s as if it were complete", roll)
	}
}

// TestEvalJSON checks that train eval --json prints one JSON object, and
// nothing else, on standard output, with the counts it played.
func TestEvalJSON(t *testing.T) {
	model := byteModel(t)
	stdout, stderr, err := runCmdErr(t, runEval, "--hf", model, "--threads", "1", "--env", "demo", "--demo-tasks", "2", "--seeds", "2", "--max-new", "4", "--json")
	if err != nil {
		t.Fatalf("eval --json: %v\n%s", err, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var r rl.EvalResult
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("eval --json printed no JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Errorf("eval --json printed more than one object:\n%s", stdout)
	}
	if r.Tasks != 2 || r.Episodes != 4 || r.Seeds != 2 || r.MaxNew != 4 || r.Model == "" || r.Method != r.Model || r.Adapter != "" {
		t.Errorf("eval --json: %+v; want 2 tasks, 4 episodes, 2 seeds, max_new 4, the model named as the method", r)
	}
	for _, v := range []float64{r.PassRate, r.PassCI95, r.Success, r.SuccessCI95} {
		if v < 0 || v > 1 {
			t.Errorf("eval --json: a rate or interval %g outside [0, 1]: %+v", v, r)
		}
	}
	if r.Successes < 0 || r.Successes > r.Episodes || !strings.Contains(stderr, "4 episodes") {
		t.Errorf("eval --json: %d successes of %d; progress on standard error:\n%s", r.Successes, r.Episodes, stderr)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"method", "pass_rate", "pass_ci95", "success", "success_ci95", "tasks", "episodes", "simulator_failures"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("eval --json lacks %q:\n%s", key, stdout)
		}
	}
}

// TestEvalTopK checks that eval's --top-k reaches the agent's sampler:
// --top-k 1 at temperature 1 plays the greedy episodes (temperature 0),
// which the same draws without --top-k do not, and --json reports it.
func TestEvalTopK(t *testing.T) {
	model := byteModel(t)
	dir := t.TempDir()
	play := func(name string, extra ...string) (rl.EvalResult, string) {
		t.Helper()
		out := filepath.Join(dir, name+".jsonl")
		args := append([]string{"--hf", model, "--threads", "1", "--env", "demo", "--demo-tasks", "2", "--max-new", "6", "--json", "--out", out}, extra...)
		stdout, stderr, err := runCmdErr(t, runEval, args...)
		if err != nil {
			t.Fatalf("eval %q: %v\n%s", extra, err, stderr)
		}
		var r rl.EvalResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("eval %q --json: %v\n%s", extra, err, stdout)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return r, string(data)
	}
	_, greedy := play("greedy", "--temperature", "0")
	r, topK := play("top1", "--temperature", "1", "--top-k", "1")
	if topK != greedy {
		t.Errorf("eval --top-k 1 --temperature 1 played other episodes than greedy:\n%s\ngreedy:\n%s", topK, greedy)
	}
	if r.TopK != 1 {
		t.Errorf("eval --json reports top_k %d, want 1", r.TopK)
	}
	if r, sampled := play("sampled", "--temperature", "1"); sampled == greedy || r.TopK != 0 {
		t.Errorf("eval --temperature 1 without --top-k: the greedy episodes (%t), top_k %d", sampled == greedy, r.TopK)
	}
}
