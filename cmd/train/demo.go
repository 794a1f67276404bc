package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/turnwise/turnwise/internal/flagcheck"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// runDemo implements "train demo".
func runDemo(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	var bf backendFlags
	bf.registerDevice(fs)
	bf.registerRecompute(fs)
	threads := fs.Int("threads", 2, "cpu: worker threads; the table depends on it (0: one per core)")
	c := pipeline.Config{Model: builtinConfig, LR: pipeline.DefaultLRs, Log: stdout}
	fs.StringVar(&c.OutDir, "out", "runs/demo", "directory for the models, rollouts, evaluation episodes and results.json")
	fs.StringVar(&c.Family, "family", "keys", "task family: "+strings.Join(pipeline.Families, " or "))
	fs.StringVar(&c.From, "from", "", "reuse this earlier run's supervised model and rollouts (same family, seed and counts)")
	stages := fs.String("stages", "all", "all: every stage; sft: the supervised start alone, evaluated on the held-out tasks; prepare: the supervised start and the rollouts, for --from; study: no training, the study over the results already in OUT/seed-S for --seeds seeds from --seed")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the tasks, the model and every sampling")
	fs.IntVar(&c.SFTTasks, "sft-tasks", pipeline.DefaultSFTTasks, "tasks of scripted dialogues for the supervised start")
	fs.IntVar(&c.SFTSteps, "sft-steps", 1200, "supervised steps")
	fs.IntVar(&c.RLTasks, "rl-tasks", pipeline.DefaultRLTasks, "tasks the policy plays for RL, the validation tasks included")
	fs.IntVar(&c.ValTasks, "val-tasks", 40, "of the RL tasks, how many are held out as the validation split")
	fs.IntVar(&c.K, "k", 8, "episodes per RL task")
	fs.IntVar(&c.TestTasks, "test-tasks", 200, "held-out tasks of the evaluation")
	fs.IntVar(&c.EvalSeeds, "eval-seeds", 2, "evaluation episodes per held-out task")
	fs.IntVar(&c.ValSeeds, "val-seeds", 2, "validation episodes per validation task")
	fs.IntVar(&c.CheckTasks, "check-tasks", 50, "tasks of the critic check")
	fs.IntVar(&c.Rank, "lora-rank", 16, "rank of every LoRA adapter")
	targets := registerLoRATargets(fs)
	fs.IntVar(&c.Candidates, "candidates", rl.RefCandidates, "actor: candidates sampled per turn")
	fs.Float64Var(&c.DataFraction, "data-fraction", rl.RefDataFraction, "actor: fraction of the agent turns used")
	fs.IntVar(&c.CriticEpochs, "critic-epochs", rl.RefCriticEpochs, "critic: epochs (the best on validation is kept)")
	score := fs.String("critic-score", "turn", "turn: the paper's score (Eq. 2–3, the sum over agent turns of per-turn mean log-ratios); trajectory: the released code's (one mean over all agent tokens)")
	baseline := fs.String("advantage-baseline", "reference", "ranking candidates: reference (paper Eq. 3: the critic's frozen reference, with the ground truth) or policy (released code: the sampling policy, without it)")
	nllScope := fs.String("nll-scope", "sequence", "the actor's NLL term: sequence (the reference: the whole chosen sequence) or reply")
	fs.Float64Var(&c.LR.Critic, "critic-lr", c.LR.Critic, "critic learning rate (without --select)")
	fs.Float64Var(&c.LR.Actor, "actor-lr", c.LR.Actor, "SWEET-RL actor learning rate (without --select)")
	fs.Float64Var(&c.LR.DPO, "mtdpo-lr", c.LR.DPO, "multi-turn DPO learning rate (without --select)")
	fs.Float64Var(&c.LR.RFT, "rft-lr", c.LR.RFT, "rejection fine-tuning learning rate (without --select)")
	fs.BoolVar(&c.Select, "select", false, "choose each method's learning rate on the validation split from a small grid")
	fs.BoolVar(&c.SelectCritic, "select-critic", false, "choose only the critics' learning rates on the validation split (pair accuracy; no episodes)")
	critSelect := fs.String("critic-select", "accuracy", "how the critic's epoch (and, with --select or --select-critic, its lr) is kept on the validation split: accuracy (pair accuracy, then loss) or check (the critic check on the validation tasks: its worst decision, then the mean, then pair accuracy)")
	fs.IntVar(&c.CheckValues, "check-values", 4, "write this many of the critic's and the actor's pairs, their values and gradients, to OUT/check/ for scripts/sweetrl_check.py (0: none)")
	fs.BoolVar(&c.Ablations, "ablations", false, "add the ablation rows, and on the keys family run the budget family too")
	fs.IntVar(&c.Settings, "settings", 0, "the equal tuning budget: validation settings per method, every critic and actor included (< 2: the configured learning rates)")
	fs.BoolVar(&c.Diagnostics, "diagnostics", false, "add the diagnostic rows: critic-guided best-of-N, the oracle-advantage actor, the critic without the ground truth, an RPO-style actor")
	fs.IntVar(&c.BestOfN, "best-of", 8, "samples per turn of the critic-guided best-of-N diagnostic")
	fs.BoolVar(&c.EpochSelect, "epoch-select", false, "validate every tuned policy (rejection fine-tuning, multi-turn DPO, each actor) after each epoch and keep its best epoch, as the critics do; a setting's epochs become its most")
	full := fs.Bool("full", false, "--diagnostics and --epoch-select, with --settings 4 unless --settings is given")
	seeds := fs.Int("seeds", 1, "training seeds: --seed, --seed+1, …; more than 1 runs each in OUT/seed-S and prints the study over them")
	if err := parse(fs, args); err != nil {
		return err
	}
	c.Targets = targets.Targets()
	if *full {
		c.Diagnostics = true
		if !fs.Changed("settings") {
			c.Settings = 4
		}
		if !fs.Changed("epoch-select") {
			c.EpochSelect = true
		}
	}
	if *seeds < 1 || c.BestOfN < 1 {
		return fmt.Errorf("--seeds %d, --best-of %d: want at least 1 of each", *seeds, c.BestOfN)
	}
	if c.Settings >= 2 && (c.Select || c.SelectCritic) {
		return errors.New("--settings gives every method its settings; --select and --select-critic choose learning rates alone: give one of them")
	}
	var err error
	if c.Score, err = rl.ParseCriticScore(*score); err != nil {
		return fmt.Errorf("--critic-score: %w", err)
	}
	if c.Baseline, err = rl.ParseAdvantageBaseline(*baseline); err != nil {
		return fmt.Errorf("--advantage-baseline: %w", err)
	}
	if c.NLLSequence, err = rl.ParseNLLScope(*nllScope); err != nil {
		return err
	}
	if c.CriticSelect, err = pipeline.ParseCriticSelect(*critSelect); err != nil {
		return fmt.Errorf("--critic-select: %w", err)
	}
	if _, err := pipeline.LookupFamily(c.Family); err != nil {
		return fmt.Errorf("--family: %w", err)
	}
	if c.CheckValues < 0 {
		return fmt.Errorf("--check-values %d: want a count ≥ 0", c.CheckValues)
	}
	switch *stages {
	case "all":
	case "sft":
		c.SFTOnly = true
		if c.From != "" {
			return errors.New("--stages sft makes the supervised start; --from reuses one: give one of them")
		}
	case "prepare":
		c.PrepareOnly = true
		if c.From != "" {
			return errors.New("--stages prepare makes the supervised start and the rollouts; --from reuses them: give one of them")
		}
	case "study":
		if c.From != "" {
			return errors.New("--stages study reads the seeds' results in --out; --from reuses stages: give one of them")
		}
		return pipeline.ReportSeeds(c, *seeds)
	default:
		return fmt.Errorf("--stages %q: want all, sft, prepare or study", *stages)
	}
	bf.threads = *threads
	if c.Backend, err = bf.open(); err != nil {
		return err
	}
	c.Recompute = bf.recompute
	return pipeline.RunSeeds(context.Background(), c, *seeds)
}

// runCriticCheck implements "train critic-check".
func runCriticCheck(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("critic-check", stderr)
	var bf backendFlags
	bf.register(fs)
	o := pipeline.CheckOptions{Log: stdout}
	fs.StringVar(&o.Run, "from", "", "a train demo run's directory: its supervised model, task family and held-out tasks")
	fs.StringVar(&o.Critic, "critic", "", "the critic's adapter directory (default: the run's critic/)")
	baseline := fs.String("advantage-baseline", "reference", "reference (paper Eq. 3) or policy (the released code)")
	fs.IntVar(&o.TestTasks, "test-tasks", 200, "the run's --test-tasks")
	fs.IntVar(&o.Tasks, "check-tasks", 50, "held-out tasks to check on (train demo's --check-tasks)")
	flagcheck.Alias(fs, "tasks", "check-tasks")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Run == "" {
		return errors.New("name the demo run with --from DIR")
	}
	var err error
	if o.Baseline, err = rl.ParseAdvantageBaseline(*baseline); err != nil {
		return fmt.Errorf("--advantage-baseline: %w", err)
	}
	if o.Backend, err = bf.open(); err != nil {
		return err
	}
	_, err = pipeline.CheckRun(context.Background(), o)
	return err
}
