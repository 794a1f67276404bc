package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/frontend/render"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// frontendTasks writes n frontend tasks to a file and returns its path: the
// first n rows of the public test split when it is there, else small pages
// of the same form (Tailwind 2 from the CDN, a picsum image).
func frontendTasks(t *testing.T, n int) string {
	t.Helper()
	var rows []string
	if d := testdata.Find(); d != "" {
		if f, err := os.Open(filepath.Join(d, "colbench", "frontend_test.jsonl")); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for len(rows) < n && sc.Scan() {
				rows = append(rows, sc.Text())
			}
		}
	}
	if len(rows) < n {
		t.Logf("the test split's frontend_test.jsonl is not there: %d small pages instead", n)
		rows = rows[:0]
		for i := range n {
			rows = append(rows, fmt.Sprintf(`{"problem_description": "Shop %d: a header, a picture and a footer.", "ground_truth": `+
				`"<html><link href=\"https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css\" rel=\"stylesheet\">`+
				`<body class=\"bg-gray-100\"><header class=\"bg-green-500 text-white p-4\"><h1 class=\"text-3xl\">Shop %d</h1></header>`+
				`<img src=\"https://picsum.photos/id/48/600/%d\"><footer class=\"bg-gray-800 text-white p-8\">Open daily</footer></body></html>"}`, i, i, 200+100*i))
		}
	}
	path := filepath.Join(t.TempDir(), "frontend.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// randomCLIP writes a random-weight CLIP image tower of ViT-B/32's layout
// at a small width (64 wide, 2 layers, patch 32 on 224×224 images) as a
// Hugging Face directory and returns it. Its matrices are drawn with
// standard deviation 1/√fan-in rather than NewRandom's 0.02, so that the
// class token's embedding depends on the image enough for two different
// screenshots to differ in cosine by more than the pairs' 0.1.
func randomCLIP(t *testing.T) string {
	t.Helper()
	c := clip.Config{Hidden: 64, FFN: 128, Layers: 2, Heads: 4, Patch: 32, ImageSize: 224, Projection: 32, NormEps: 1e-5}
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := clip.NewRandom(b, c, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Weights.Each(func(name string, w *engine.Tensor) {
		s := w.Shape()
		if len(s) != 2 || strings.Contains(name, "embedding") {
			return // biases, norms, the class, position and patch embeddings
		}
		vals := engine.ToF32(b, w)
		for i := range vals {
			vals[i] *= float32(1 / math.Sqrt(float64(s[1])) / 0.02)
		}
		engine.SetF32(b, w, vals)
	})
	dir := filepath.Join(t.TempDir(), "clip")
	if err := m.SaveHF(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFrontendCommands runs the pipeline's commands on frontend tasks with
// a tiny random byte-level agent, the scripted simulator, a random-weight
// CLIP and chromium rendering offline: rollout; critic, actor, rft and
// mtdpo on the rollout's trajectories together with attempts whose last
// page is the target (scored by the same scorer, so that similarities
// differ and make pairs); eval of the actor, and of the base model against
// the actor's answers.
func TestFrontendCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium and trains five adapters")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("chromium not installed (scripts/setup.sh installs it): frontend pages cannot be rendered")
	}
	if _, err := render.FindTailwindCLI(); err != nil {
		t.Skipf("no Tailwind CLI (%v): frontend pages cannot be styled offline", err)
	}
	dir := t.TempDir()
	tasks := frontendTasks(t, 2)
	clipDir := randomCLIP(t)
	c := builtinConfig
	c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.MaxSeqLen = 32, 1, 2, 1, 16, 64, 16384
	lm, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model")
	if err := lm.SaveHF(model); err != nil {
		t.Fatal(err)
	}
	common := []string{"--hf", model, "--threads", "1", "--env", "frontend"}
	play := append(common, "--tasks", tasks, "--simulator", "scripted", "--max-new", "8", "--render-tabs", "2")

	// Without CLIP weights the commands say so and stop.
	for _, run := range []func([]string, io.Reader, io.Writer, io.Writer) error{runRollout, runEval} {
		_, err := runCmd(t, run, "", append(play, "--out", filepath.Join(dir, "none.jsonl"))...)
		if err == nil || !strings.Contains(err.Error(), "--clip DIR") || !strings.Contains(err.Error(), "no substitute metric") {
			t.Errorf("without --clip: %v", err)
		}
	}
	if exists(filepath.Join(dir, "none.jsonl")) {
		t.Error("a rollout without CLIP wrote trajectories")
	}

	// Rollout: the agent writes no page, so each answer is the black
	// square, and the simulator asks for a page after every turn.
	roll := filepath.Join(dir, "roll.jsonl")
	out, err := runCmd(t, runRollout, "", append(play, "--clip-model", clipDir, "--k", "2", "--out", roll)...)
	if err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	if !strings.Contains(out, "4 episodes (2 tasks × 2); scoring with the cosine of CLIP image embeddings") {
		t.Errorf("rollout output:\n%s", out)
	}
	trajs, err := sweetrl.LoadTrajectories(roll)
	if err != nil || len(trajs) != 4 {
		t.Fatalf("rollout wrote %d trajectories (%v)", len(trajs), err)
	}
	for i, tr := range trajs {
		h := tr.DialogueHistory
		if len(h) != 2*frontend.MaxAgentTurns || h[2].Content != frontend.ScriptedNoPage || h[1].Input == "" || !strings.Contains(h[1].Input, "Tailwind") {
			t.Errorf("trajectory %d: %d turns, the human's first reply %q", i, len(h), h[2].Content)
		}
		if tr.Answer != "" || !(tr.Reward >= 0 && tr.Reward <= 1) {
			t.Errorf("trajectory %d: answer %q, reward %v; want no page and a reward in [0, 1]", i, tr.Answer, tr.Reward)
		}
	}
	if trajs[0].Reward != trajs[1].Reward { // episodes of a task come together
		t.Errorf("two black answers to one task score %v and %v", trajs[0].Reward, trajs[2].Reward)
	}

	// Attempts whose last page is the target, or a plain page, scored as
	// the rollout scores them; the target scores 1 against itself.
	env := pipeline.Env{Family: "frontend", CLIP: clipDir, Render: render.Options{Tabs: 2}}
	defer env.Close()
	scorer, _, err := env.NewScorer(context.Background(), cpu.New(cpu.Options{Threads: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var more []sweetrl.Trajectory
	for i, page := range []string{"", `<html><body><p>Welcome.</p></body></html>`} {
		for _, tr := range []sweetrl.Trajectory{trajs[0], trajs[2]} {
			tr.DialogueHistory = append([]sweetrl.Turn(nil), tr.DialogueHistory...)
			last := &tr.DialogueHistory[len(tr.DialogueHistory)-1]
			if i == 0 {
				page = tr.Task.GroundTruth
			}
			last.Output = "Here it is.\nOUTPUT: I WANT TO ANSWER: " + page
			last.Content = sweetrl.VisibleReply(last.Output)
			tr.Answer = frontend.LastPage(tr.DialogueHistory)
			more = append(more, tr)
		}
	}
	if _, err := rl.Score(context.Background(), scorer, more); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if math.Abs(more[i].Reward-1) > 1e-6 {
			t.Errorf("task %d's target scores %v against itself, want 1", i, more[i].Reward)
		}
	}
	all := append(trajs, more...)
	pairs := len(frontend.TrajectoryPairs(all))
	t.Logf("similarities: rollout %.4f %.4f %.4f %.4f, target 1, plain page %.4f %.4f: %d pairs",
		trajs[0].Reward, trajs[1].Reward, trajs[2].Reward, trajs[3].Reward, more[2].Reward, more[3].Reward, pairs)
	if pairs == 0 {
		t.Fatal("no two attempts of a task differ by 0.1 in similarity")
	}
	scored := filepath.Join(dir, "scored.jsonl")
	if err := sweetrl.SaveTrajectories(scored, all); err != nil {
		t.Fatal(err)
	}

	// The trainers: frontend pairs for the critic and multi-turn DPO, each
	// task's best attempt for rejection fine-tuning.
	train := append(common, "--trajectories", scored, "--lora-rank", "2", "--batch-tokens", "16384", "--max-len", "16384", "--lr", "1e-3")
	critic := filepath.Join(dir, "critic")
	out, err = runCmd(t, runCritic, "", append(train, "--out", critic, "--epochs", "1")...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("Bradley–Terry on %d trajectory pairs", pairs)) {
		t.Fatalf("critic: %v\n%s", err, out)
	}
	actor := filepath.Join(dir, "actor")
	out, err = runCmd(t, runActor, "", append(train, "--critic", critic, "--candidates", "2", "--data-fraction", "0.05", "--max-new", "6", "--out", actor)...)
	if err != nil || !strings.Contains(out, "turn-wise DPO") {
		t.Fatalf("actor: %v\n%s", err, out)
	}
	out, err = runCmd(t, runRFT, "", append(train, "--out", filepath.Join(dir, "rft"))...)
	if err != nil || !strings.Contains(out, "rejection fine-tuning on 2 best attempts of their tasks") {
		t.Fatalf("rft: %v\n%s", err, out)
	}
	out, err = runCmd(t, runMTDPO, "", append(train, "--out", filepath.Join(dir, "mtdpo"))...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("multi-turn DPO on %d trajectory pairs", pairs)) {
		t.Fatalf("mtdpo: %v\n%s", err, out)
	}
	for _, d := range []string{critic, actor, "rft", "mtdpo"} {
		if !exists(filepath.Join(dir, filepath.Base(d), "adapter_model.safetensors")) {
			t.Errorf("%s: no adapter written", d)
		}
	}
	// Under the backend's rules each task's target attempt (reward 1) is
	// paired with its three other attempts: --env picks the rules.
	if out, err := runCmd(t, runMTDPO, "", append(train, "--env", "colbench", "--out", filepath.Join(dir, "mtdpo-backend"))...); err != nil ||
		!strings.Contains(out, "multi-turn DPO on 6 trajectory pairs") {
		t.Errorf("mtdpo under the backend's rules: %v\n%s", err, out)
	}

	// Eval: the actor's mean cosine, then the base model's win rate
	// against the actor's answers (both write no page: every task ties).
	eps := filepath.Join(dir, "actor-eval.jsonl")
	eval := append(play, "--clip-model", clipDir)
	out, err = runCmd(t, runEval, "", append(eval, "--adapter", actor, "--out", eps)...)
	if err != nil || !regexp.MustCompile(`mean CLIP cosine 0\.\d{4} ± 0\.\d{4} \(2 tasks, 2 episodes`).MatchString(out) {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if got, err := sweetrl.LoadTrajectories(eps); err != nil || len(got) != 2 {
		t.Fatalf("eval wrote %d episodes (%v)", len(got), err)
	}
	out, err = runCmd(t, runEval, "", append(eval, "--against", eps)...)
	if err != nil || !strings.Contains(out, "win rate against "+eps+": 50.0% [") || !strings.Contains(out, "(0 wins, 2 ties, 0 losses of 2 tasks, tie margin 0;") {
		t.Fatalf("eval --against: %v\n%s", err, out)
	}
	if _, err := runCmd(t, runEval, "", append(eval, "--against", eps, "--seeds", "2")...); err == nil || !strings.Contains(err.Error(), "--seeds 1") {
		t.Errorf("--against with 2 seeds: %v", err)
	}
}
