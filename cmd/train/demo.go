package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

const demoUsage = `usage: train demo [flags]

The whole SWEET-RL pipeline on a built-in collaborative task family, on the
CPU, in minutes. %s

Steps: a small byte-level model is trained from scratch (SFT) on scripted
dialogues of mixed quality; it plays K episodes of each training task
against a scripted human simulator; a critic (a LoRA adapter over the SFT
model) is trained with the Bradley–Terry loss on trajectory pairs, seeing
the ground truth; the actor (another adapter) is trained with turn-wise DPO
on best-of-N candidates ranked by the critic's advantage; the baselines
rejection fine-tuning and multi-turn DPO are trained on the same rollouts;
each policy then plays held-out tasks, and a table of their pass rate and
success with 95%% confidence intervals is printed.

Everything is written to --out: the SFT model (sft/, a Hugging Face
checkpoint), the adapters (critic/, actor/, rft/, mtdpo/, in PEFT's
layout), the rollouts, the evaluation episodes and results.json. The single
steps can be rerun from them, e.g.
  train eval --hf runs/demo/sft --adapter runs/demo/actor --env demo --seeds 2

flags:
`

// The demo's default task counts: the family's tasks in seeded order are
// the SFT tasks, then the RL tasks, then the held-out tasks.
const (
	demoSFTTasks = 3000
	demoRLTasks  = 200
)

// demoResult is one row of the demo's table, as written to results.json.
type demoResult struct {
	Method  string      `json:"method"`
	Summary *rl.Summary `json:"summary,omitempty"`
	Skipped string      `json:"skipped,omitempty"` // why the method has no result
}

// runDemo implements "train demo".
func runDemo(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, demoUsage, demotask.Describe()); fs.PrintDefaults() }
	outDir := fs.String("out", "runs/demo", "directory for the rollouts, evaluation episodes and results.json")
	seed := fs.Uint64("seed", 1, "seed of the tasks, the model and every sampling")
	var bf backendFlags
	bf.registerTraining(fs)
	sftTasks := fs.Int("sft-tasks", demoSFTTasks, "tasks of scripted dialogues for the supervised start")
	sftSteps := fs.Int("sft-steps", 1200, "supervised steps")
	rlTasks := fs.Int("rl-tasks", demoRLTasks, "training tasks the policy plays for RL")
	k := fs.Int("k", 8, "episodes per training task")
	testTasks := fs.Int("test-tasks", 200, "held-out tasks of the evaluation")
	seeds := fs.Int("eval-seeds", 2, "evaluation episodes per held-out task")
	rank := fs.Int("lora-rank", 16, "rank of the critic's, the actor's and the baselines' LoRA adapters")
	lr := fs.Float64("lr", 5e-4, "learning rate of the adapters (critic, actor, baselines)")
	candidates := fs.Int("candidates", 16, "actor: candidates sampled per turn")
	fraction := fs.Float64("data-fraction", 0.1, "actor: fraction of the agent turns used")
	criticHead := fs.String("critic-head", "logprob", "logprob: the reference's critic; scalar: the paper's value-head ablation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if *criticHead != "logprob" && *criticHead != "scalar" {
		return fmt.Errorf("--critic-head %q: want logprob or scalar", *criticHead)
	}
	start := time.Now()
	ctx := context.Background()
	b, err := bf.open()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	tok := tokenizer.Bytes{}
	proto := demotask.Protocol()
	sim, scorer := demotask.Simulator{}, demotask.Scorer{}
	train, test := demotask.Split(*seed, *sftTasks+*rlTasks, *testTasks)
	const maxNew = 48
	phase := 0
	header := func(s string, a ...any) {
		phase++
		fmt.Fprintf(stdout, "\n[%d/8 %s] %s\n", phase, elapsed(start), fmt.Sprintf(s, a...))
	}

	// 1. The supervised start, from scratch.
	scripted := demotask.ScriptedTrajectories(train[:*sftTasks], 1, *seed)
	header("supervised start: %d scripted dialogues (mean reward %.2f), a %s model from scratch",
		len(scripted), meanReward(scripted), "byte-level")
	m, err := llama.NewRandom(b, builtinConfig, engine.F32, 0.02, *seed)
	if err != nil {
		return err
	}
	bf.apply(m)
	ex, err := rl.Examples(tok, proto.System, scripted)
	if err != nil {
		return err
	}
	if err := supervisedFT(m, nil, ex, sftOptions{Steps: *sftSteps, BatchTokens: 2048, MaxLen: 256, LR: 3e-3, Seed: *seed}, stdout); err != nil {
		return err
	}
	if err := m.SaveHF(filepath.Join(*outDir, "sft")); err != nil {
		return err
	}

	// 2. Rollouts of the SFT policy on the RL tasks.
	rlSet := train[*sftTasks:]
	var rollTasks []sweetrl.Task
	for _, t := range rlSet {
		for range *k {
			rollTasks = append(rollTasks, t)
		}
	}
	header("rollouts: %d episodes (%d tasks × %d) of the SFT policy at temperature 1", len(rollTasks), len(rlSet), *k)
	pol := &rl.Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: maxNew, MaxBatch: 256, Seed: *seed}
	trajs, err := rl.RunEpisodes(ctx, rollTasks, pol, sim, rl.RolloutOptions{Protocol: proto, Progress: stdout, Label: "episodes"})
	if err != nil {
		return err
	}
	if _, err := rl.Score(ctx, scorer, trajs); err != nil {
		return err
	}
	if err := sweetrl.SaveTrajectories(filepath.Join(*outDir, "rollouts.jsonl.zst"), trajs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rollouts: mean reward %.3f, success %.3f\n", meanReward(trajs), successRate(trajs))

	pref := func(label string, epochs int, nll float64) rl.PrefOptions {
		return rl.PrefOptions{Beta: 0.1, NLLCoef: nll, Epochs: epochs, PairsPerStep: 8, BatchTokens: 4096, LR: *lr,
			WarmupFrac: 0.03, MinLRRatio: 0.1, AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, MaxGradNorm: 1},
			Seed: *seed, Progress: stdout, Label: label}
	}

	// Each method is an adapter over the SFT model; a method whose data
	// came out empty (no successful rollout to learn from) is reported as
	// skipped rather than trained on nothing.
	adapters := map[string]*llama.Adapter{}
	skipped := map[string]string{}
	fit := func(name string, n int, what string, fn func(ad *llama.Adapter) error) error {
		if n == 0 {
			skipped[name] = "no " + what
			fmt.Fprintf(stdout, "skipped: no %s\n", what)
			return nil
		}
		ad, err := newLoRA(m, *rank, *seed+uint64(len(adapters))+1)
		if err != nil {
			return err
		}
		if err := fn(ad); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		adapters[name] = ad
		return m.SavePEFT(ad, filepath.Join(*outDir, name))
	}

	// 3. The critic.
	cpairs, err := rl.CriticPairs(tok, proto.System, trajs, rl.ScoreTurn)
	if err != nil {
		return err
	}
	header("critic (%s head): Bradley–Terry on %d trajectory pairs, LoRA r=%d over the SFT model, ground truth in its prompt", *criticHead, len(cpairs), *rank)
	var head *rl.ValueHead // the value-head ablation
	err = fit("critic", len(cpairs), "trajectory pairs (no task has a successful rollout)", func(ad *llama.Adapter) error {
		var st rl.PrefStats
		if *criticHead == "scalar" {
			if head, err = rl.NewValueHead(m); err != nil {
				return err
			}
			if st, err = rl.TrainValueCritic(m, ad, head, cpairs, pref("critic step", 2, 0)); err != nil {
				return err
			}
		} else if st, err = rl.TrainPreferences(m, ad, cpairs, pref("critic step", 2, 0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "critic: loss %.4f → %.4f, pair accuracy %.3f → %.3f\n", st.FirstLoss, st.LastLoss, st.FirstAcc, st.LastAcc)
		return criticCheck(ctx, rl.Critic{Model: m, Adapter: ad, Head: head}, pol, test[:min(len(test), 50)], stdout)
	})
	if err != nil {
		return err
	}
	if head != nil && adapters["critic"] != nil { // beside the critic's adapter, where train actor finds it
		if err := head.Save(b, filepath.Join(*outDir, "critic", rl.ValueHeadFile)); err != nil {
			return err
		}
	}

	// 4. The actor: turn-wise DPO on best-of-N candidates.
	header("actor: %d candidates per turn on %.0f%% of the agent turns, ranked by the critic's advantage", *candidates, 100**fraction)
	var apairs []rl.PrefPair
	if critic := adapters["critic"]; critic != nil {
		var ast rl.ActorStats
		apairs, ast, err = rl.ActorPairs(trajs, pol, rl.Critic{Model: m, Adapter: critic, Head: head},
			rl.ActorOptions{Protocol: proto, Candidates: *candidates, PairsPerTurn: 4, DataFraction: *fraction, BatchTokens: 4096, Seed: *seed, Progress: stdout})
		if err != nil {
			return fmt.Errorf("actor: %w", err)
		}
		fmt.Fprintf(stdout, "actor: %d turns, %d pairs (%d identical pairs dropped), mean advantage spread %.3f\n", ast.Turns, ast.Pairs, ast.TiedPairs, ast.MeanSpread)
	}
	err = fit("actor", len(apairs), "turn pairs (no critic, or every pair's candidates were identical)", func(ad *llama.Adapter) error {
		_, err := rl.TrainPreferences(m, ad, apairs, pref("actor step", 1, 0.01))
		return err
	})
	if err != nil {
		return err
	}

	// 5. Rejection fine-tuning.
	rft, err := rl.RFTExamples(tok, proto.System, trajs)
	if err != nil {
		return err
	}
	header("rejection fine-tuning: SFT on the %d successful rollouts, LoRA r=%d", len(rft), *rank)
	err = fit("rft", len(rft), "successful rollouts", func(ad *llama.Adapter) error {
		return supervisedFT(m, ad, rft, sftOptions{Steps: max(20, 2*len(rft)*100/2048), BatchTokens: 2048, MaxLen: 256, LR: *lr, Seed: *seed}, stdout)
	})
	if err != nil {
		return err
	}

	// 6. Multi-turn DPO.
	dpairs, err := rl.TrajectoryPairs(tok, proto.System, trajs)
	if err != nil {
		return err
	}
	header("multi-turn DPO: %d trajectory pairs, LoRA r=%d", len(dpairs), *rank)
	err = fit("mtdpo", len(dpairs), "trajectory pairs (no task has a successful rollout)", func(ad *llama.Adapter) error {
		_, err := rl.TrainPreferences(m, ad, dpairs, pref("multi-turn DPO step", 1, 0))
		return err
	})
	if err != nil {
		return err
	}

	// 7. Evaluation on held-out tasks.
	header("evaluation: %d held-out tasks × %d seeds per method, temperature 1", len(test), *seeds)
	methods := []struct{ name, key string }{{"SFT start", ""}, {"rejection fine-tuning", "rft"}, {"multi-turn DPO", "mtdpo"}, {"SWEET-RL", "actor"}}
	var results []demoResult
	for i, mt := range methods {
		ad := adapters[mt.key]
		if mt.key != "" && ad == nil {
			results = append(results, demoResult{Method: mt.name, Skipped: skipped[mt.key]})
			continue
		}
		s, eps, err := evaluate(ctx, m, ad, tok, proto, test, sim, scorer,
			evalOptions{Seeds: *seeds, Temperature: 1, MaxNew: maxNew, Seed: *seed + 7777, Label: mt.name}, stdout)
		if err != nil {
			return fmt.Errorf("evaluating %s: %w", mt.name, err)
		}
		if err := sweetrl.SaveTrajectories(filepath.Join(*outDir, fmt.Sprintf("eval-%d.jsonl.zst", i)), eps); err != nil {
			return err
		}
		results = append(results, demoResult{Method: mt.name, Summary: &s})
	}

	// 8. The table.
	header("results on held-out tasks")
	fmt.Fprintf(stdout, "%-24s %-18s %-18s\n", "method", "pass rate", "success")
	for _, r := range results {
		if s := r.Summary; s != nil {
			fmt.Fprintf(stdout, "%-24s %5.1f%% ± %-8.1f %5.1f%% ± %-8.1f\n", r.Method, 100*s.PassRate, 100*s.PassCI, 100*s.Success, 100*s.SuccessCI)
		} else {
			fmt.Fprintf(stdout, "%-24s skipped: %s\n", r.Method, r.Skipped)
		}
	}
	fmt.Fprintf(stdout, "(95%% confidence intervals over %d tasks; %d episodes per method; total time %s)\n", len(test), results[0].Summary.Episodes, elapsed(start))
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*outDir, "results.json"), append(js, '\n'), 0o644)
}

// criticCheck shows how the critic ranks the decisions that matter in the
// demo's tasks, on held-out tasks: at the start, asking for the first key
// against answering at once with guessed digits; once every key has been
// asked, answering right against asking again and against a wrong answer.
func criticCheck(ctx context.Context, c rl.Critic, pol *rl.Sampler, tasks []sweetrl.Task, out io.Writer) error {
	type check struct {
		name        string
		wins        int
		first, last float64 // summed advantages of the first and the second candidate
	}
	checks := []*check{{name: "at the start, ask a key over answering with guesses"},
		{name: "all keys asked, answer right over asking again"}, {name: "all keys asked, answer right over a wrong answer"}}
	for _, t := range tasks {
		var keys []string
		for _, tc := range t.TestCases {
			keys = append(keys, tc.Call)
		}
		guess := sweetrl.AnswerMarker + " " + keys[0] + "=0 " + keys[1] + "=0 " + keys[2] + "=0"
		right := sweetrl.AnswerMarker + " " + t.GroundTruth
		e := sweetrl.NewEpisodeWith(t, demotask.Protocol())
		start, err := c.Advantages(pol, "", t, e.History(), []string{keys[0] + "?", guess}, 4096)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := e.AgentTurn("", k+"?"); err != nil {
				return err
			}
			r, err := demotask.Simulator{}.Respond(ctx, t, e.Messages())
			if err != nil {
				return err
			}
			if err := e.HumanTurn(r); err != nil {
				return err
			}
		}
		asked, err := c.Advantages(pol, "", t, e.History(), []string{right, keys[0] + "?", guess}, 4096)
		if err != nil {
			return err
		}
		for i, pair := range [][2]float64{{start[0], start[1]}, {asked[0], asked[1]}, {asked[0], asked[2]}} {
			if pair[0] > pair[1] {
				checks[i].wins++
			}
			checks[i].first += pair[0]
			checks[i].last += pair[1]
		}
	}
	n := float64(len(tasks))
	how := "critic's mean log-prob − its frozen reference's"
	if c.Baseline == rl.BaselinePolicy {
		how = "critic's mean log-prob − policy's"
	}
	if c.Head != nil {
		how = "the value head's value"
	}
	fmt.Fprintf(out, "critic check on %d held-out tasks (advantage = %s):\n", len(tasks), how)
	for _, ch := range checks {
		fmt.Fprintf(out, "  %-52s %5.1f%% of tasks (mean advantages %+.3f vs %+.3f)\n", ch.name, 100*float64(ch.wins)/n, ch.first/n, ch.last/n)
	}
	return nil
}

func elapsed(start time.Time) string { return formatClock(time.Since(start)) }

// formatClock writes d as m:ss.
func formatClock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func meanReward(trajs []sweetrl.Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		s += t.Reward
	}
	return s / float64(max(len(trajs), 1))
}

func successRate(trajs []sweetrl.Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		if t.Reward == 1 {
			s++
		}
	}
	return s / float64(max(len(trajs), 1))
}
