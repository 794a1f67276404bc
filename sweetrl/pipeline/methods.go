package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"

	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// criticSpec is one critic the demo trains.
type criticSpec struct {
	key, name string
	score     rl.CriticScore
	value     bool // the value-head ablation
}

// policy is a trained policy adapter and how it was chosen.
type policy struct {
	ad        *llama.Adapter
	lr        float64
	trainLoss float64
}

// row is a method of the table: its name, its adapter's directory (""
// for the SFT start), the trained policy, or why it was skipped.
type row struct {
	name, key string
	pol       *policy
	skipped   string
}

// methods trains every method, evaluates it on the test tasks and prints
// the table.
func (r *runner) methods() error {
	c := r.c
	var rows []row
	rows = append(rows, row{name: "SFT start"})

	// Rejection fine-tuning and multi-turn DPO.
	rft, err := r.trainRFT()
	if err != nil {
		return err
	}
	rows = append(rows, row{name: "rejection fine-tuning", key: "rft", pol: rft, skipped: skipIf(rft, "no successful rollout")})
	dpo, err := r.trainMTDPO()
	if err != nil {
		return err
	}
	rows = append(rows, row{name: "multi-turn DPO", key: "mtdpo", pol: dpo, skipped: skipIf(dpo, "no trajectory pairs")})

	// SWEET-RL, with each critic.
	specs := []criticSpec{{key: "critic", name: "paper's score", score: c.Score}}
	if c.Full {
		other := rl.ScoreTrajectory
		if c.Score == rl.ScoreTrajectory {
			other = rl.ScoreTurn
		}
		specs = append(specs, criticSpec{key: "critic-" + other.String(), name: other.String() + " score", score: other},
			criticSpec{key: "critic-value", name: "value-head critic", value: true})
	}
	for i := range specs {
		if specs[i].score == rl.ScoreTrajectory && !specs[i].value {
			specs[i].name = "released code's score"
		}
	}
	for _, sp := range specs {
		cr, err := r.trainCritic(sp)
		if err != nil {
			return err
		}
		baselines := []rl.AdvantageBaseline{c.Baseline}
		if sp.score == rl.ScoreTrajectory && !sp.value {
			baselines = []rl.AdvantageBaseline{rl.BaselinePolicy} // the released code's recipe whole
		}
		if c.Full && sp.key == "critic" {
			baselines = []rl.AdvantageBaseline{c.Baseline, 1 - c.Baseline}
		}
		for _, bl := range baselines {
			name, key := "SWEET-RL (value-head critic)", "actor-value"
			switch {
			case sp.value:
			case sp.key == "critic" && bl == c.Baseline:
				name, key = fmt.Sprintf("SWEET-RL (%s)", sp.name), "actor"
			case sp.key == "critic":
				name, key = fmt.Sprintf("SWEET-RL (%s, %s baseline)", sp.name, bl), "actor-"+bl.String()
			default:
				name, key = fmt.Sprintf("SWEET-RL (%s, %s baseline)", sp.name, bl), "actor-"+sp.score.String()
			}
			if cr == nil {
				rows = append(rows, row{name: name, key: key, skipped: "no critic pairs"})
				continue
			}
			crit := *cr
			crit.Baseline = bl
			act, err := r.trainActor(key, crit)
			if err != nil {
				return err
			}
			rows = append(rows, row{name: name, key: key, pol: act, skipped: skipIf(act, "no turn pairs")})
		}
	}

	return r.evaluate(rows)
}

// evaluate plays the held-out tasks with each row's policy, prints the
// table and writes results.json.
func (r *runner) evaluate(rows []row) error {
	c := r.c
	r.header("evaluation: %d held-out tasks × %d seeds per method, temperature 1", len(r.test), c.EvalSeeds)
	for i, rw := range rows {
		out := Row{Method: rw.name, Skipped: rw.skipped}
		if rw.key != "" && rw.pol == nil {
			r.res.Rows = append(r.res.Rows, out)
			continue
		}
		var ad *llama.Adapter
		if rw.pol != nil {
			ad, out.LR, out.TrainLoss = rw.pol.ad, rw.pol.lr, rw.pol.trainLoss
		}
		s, eps, err := rl.Evaluate(r.ctx, r.m, ad, r.tok, r.f.Protocol, r.test, r.f.Sim, r.f.Scorer,
			rl.EvalOptions{Seeds: c.EvalSeeds, Temperature: 1, MaxNew: maxNew, Seed: c.Seed + 7777, Label: rw.name}, c.Log)
		if err != nil {
			return fmt.Errorf("evaluating %s: %w", rw.name, err)
		}
		if err := sweetrl.SaveTrajectories(filepath.Join(c.OutDir, fmt.Sprintf("eval-%d.jsonl.zst", i)), eps); err != nil {
			return err
		}
		h := EpisodeHealth(eps)
		out.Summary, out.Health = &s, &h
		r.res.Rows = append(r.res.Rows, out)
	}
	r.header("results on %d held-out tasks of the %s family (seed %d; %s)", len(r.test), r.f.Name, c.Seed, r.res.Machine)
	PrintTable(c.Log, &r.res)
	fmt.Fprintf(c.Log, "(total time %s)\n", clock(timeSince(r.start)))
	js, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(c.OutDir, "results.json"), append(js, '\n'), 0o644)
}

func skipIf(p *policy, why string) string {
	if p == nil {
		return why
	}
	return ""
}

// PrintTable writes the demo's table: each method's pass rate and success
// with 95% confidence intervals, its episodes' health and its learning
// rate, then each critic's check.
func PrintTable(w interface{ Write([]byte) (int, error) }, res *Result) {
	fmt.Fprintf(w, "%-52s %-15s %-15s %6s %6s %8s %9s\n", "method", "pass rate", "success", "degen", "no-ans", "lr", "train loss")
	for _, rw := range res.Rows {
		s := rw.Summary
		if s == nil {
			fmt.Fprintf(w, "%-52s skipped: %s\n", rw.Method, rw.Skipped)
			continue
		}
		lr, loss := "-", "-"
		if rw.LR != 0 {
			lr = fmt.Sprintf("%.0e", rw.LR)
		}
		if rw.TrainLoss != 0 {
			loss = fmt.Sprintf("%.4f", rw.TrainLoss)
		}
		fmt.Fprintf(w, "%-52s %5.1f%% ± %-5.1f %5.1f%% ± %-5.1f %5.1f%% %5.1f%% %8s %9s\n", rw.Method,
			100*s.PassRate, 100*s.PassCI, 100*s.Success, 100*s.SuccessCI, 100*rw.Health.Degenerate, 100*rw.Health.NoAnswer, lr, loss)
	}
	if len(res.Rows) > 0 && res.Rows[0].Summary != nil {
		fmt.Fprintf(w, "(95%% confidence intervals over %d tasks, %d episodes per method; degen: episodes with a reply that is not text; no-ans: episodes without an answer)\n",
			res.Rows[0].Summary.Tasks, res.Rows[0].Summary.Episodes)
	}
	for _, cr := range res.Critics {
		bl := ""
		if cr.Baseline != "" {
			bl = " (" + cr.Baseline + " baseline)"
		}
		fmt.Fprintf(w, "critic %-28s lr %.0e, epoch %d: validation pair accuracy %.3f, loss %.4f, drift %.3f nats/token; check on held-out tasks%s %s%%\n",
			cr.Name, cr.LR, cr.Epoch, cr.Val.Accuracy, cr.Val.Loss, cr.Val.Drift, bl, CheckSummary(cr.Check))
	}
	for _, ch := range res.Choices {
		fmt.Fprintf(w, "chosen: %s\n", ch)
	}
}

// trainCritic trains the critic sp at each learning rate to try, keeping
// each run's best epoch on the validation split by c.CriticSelect, and
// returns the best run's critic (nil when there are no pairs).
func (r *runner) trainCritic(sp criticSpec) (*rl.Critic, error) {
	c := r.c
	tr, err := rl.CriticPairs(r.tok, r.f.Protocol.System, r.rlTrain, sp.score)
	if err != nil {
		return nil, err
	}
	val, err := rl.CriticPairs(r.tok, r.f.Protocol.System, r.rlVal, sp.score)
	if err != nil {
		return nil, err
	}
	head := "log-probability"
	if sp.value {
		head = "value-head"
	}
	r.header("critic (%s, %s): Bradley–Terry on %d trajectory pairs (%d validation pairs), LoRA r=%d, ground truth in its prompt, up to %d epochs",
		sp.name, head, len(tr), len(val), c.Rank, c.CriticEpochs)
	if len(tr) == 0 {
		r.logf("skipped: no task has a successful rollout")
		return nil, nil
	}
	type run struct {
		crit  rl.Critic
		epoch int
		ev    CriticEval
		lr    float64
	}
	var best *run
	valCheck := r.val[:min(len(r.val), c.CheckTasks)]
	for _, lr := range r.lrs("critic", c.LR.Critic) {
		ad, err := r.m.NewAdapter(llama.LoRAFor(c.Rank, c.Targets), r.adapterSeed(sp.key))
		if err != nil {
			return nil, err
		}
		var vh *rl.ValueHead
		if sp.value {
			if vh, err = rl.NewValueHead(r.m); err != nil {
				return nil, err
			}
		}
		var keep snapshot
		cur := run{lr: lr}
		o := r.prefOptions("critic step", c.CriticEpochs, 0, lr)
		o.AfterEpoch = func(epoch int, st rl.PrefStats) error {
			var ev CriticEval
			var err error
			if sp.value {
				ev.Pairs, err = rl.EvalValuePairs(r.m, ad, vh, val, batchTokens)
			} else {
				ev.Pairs, err = rl.EvalPairs(r.m, ad, r.m, nil, val, o.Beta, batchTokens)
			}
			if err != nil {
				return err
			}
			check := ""
			if c.CriticSelect == SelectCheck {
				crit := rl.Critic{Model: r.m, Adapter: ad, Head: vh, Baseline: c.Baseline}
				if ev.Check, err = CriticCheck(r.ctx, r.f, crit, r.pol, valCheck, batchTokens); err != nil {
					return err
				}
				check = fmt.Sprintf(", check %s%%", CheckSummary(ev.Check))
			}
			mark := ""
			if keep == nil || c.CriticSelect.Better(ev, cur.ev) {
				keep, cur.epoch, cur.ev, mark = take(r.m.Backend(), ad, vh), epoch, ev, "  (best so far)"
			}
			r.logf("critic lr %.0e epoch %d: train loss %.4f, accuracy %.3f; validation accuracy %.3f, loss %.4f, drift %.3f nats/token%s%s",
				lr, epoch, st.LastLoss, st.LastAcc, ev.Pairs.Accuracy, ev.Pairs.Loss, ev.Pairs.Drift, check, mark)
			return nil
		}
		if sp.value {
			_, err = rl.TrainValueCritic(r.m, ad, vh, tr, o)
		} else {
			_, err = rl.TrainPreferences(r.m, ad, tr, o)
		}
		if err != nil {
			return nil, fmt.Errorf("critic: %w", err)
		}
		keep.restore(r.m.Backend(), ad, vh)
		cur.crit = rl.Critic{Model: r.m, Adapter: ad, Head: vh, Baseline: c.Baseline}
		checks := cur.ev.Check
		if checks == nil {
			if checks, err = CriticCheck(r.ctx, r.f, cur.crit, r.pol, valCheck, batchTokens); err != nil {
				return nil, err
			}
		}
		r.logf("critic lr %.0e: kept epoch %d; critic check on validation tasks %s%%", lr, cur.epoch, CheckSummary(checks))
		if best == nil || c.CriticSelect.Better(cur.ev, best.ev) {
			cp := cur
			best = &cp
		}
	}
	configured := ""
	if !c.Select && !c.SelectCritic {
		configured = " (configured)"
	}
	why := fmt.Sprintf("critic (%s): lr %.0e%s, epoch %d of %d — %s", sp.name, best.lr, configured, best.epoch, c.CriticEpochs, c.CriticSelect.Describe())
	if best.ev.Check != nil {
		why += fmt.Sprintf(" %s%%, pair accuracy", CheckSummary(best.ev.Check))
	}
	why += fmt.Sprintf(" %.3f", best.ev.Pairs.Accuracy)
	r.res.Choices = append(r.res.Choices, why)
	r.logf("chosen: %s", why)
	if err := r.m.SavePEFT(best.crit.Adapter, filepath.Join(c.OutDir, sp.key)); err != nil {
		return nil, err
	}
	if c.CheckValues > 0 && sp.key == "critic" && !sp.value {
		if err := r.arithCritic(sp, best.crit, tr, best.lr); err != nil {
			return nil, err
		}
	}
	if best.crit.Head != nil {
		if err := best.crit.Head.Save(r.m.Backend(), filepath.Join(c.OutDir, sp.key, rl.ValueHeadFile)); err != nil {
			return nil, err
		}
	}
	// The check on held-out tasks, with each baseline for a log-probability
	// critic (the paper's and the released code's).
	// The report keeps the check with the baseline this critic's actor
	// ranks by: the released code's score goes with its policy baseline.
	rep := CriticReport{Name: sp.name, LR: best.lr, Epoch: best.epoch, Val: best.ev.Pairs}
	bls := []rl.AdvantageBaseline{c.Baseline}
	if sp.score == rl.ScoreTrajectory && !sp.value {
		bls[0] = rl.BaselinePolicy
	}
	if !sp.value {
		bls = append(bls, 1-bls[0])
		rep.Baseline = bls[0].String()
	}
	for k, bl := range bls {
		crit := best.crit
		crit.Baseline = bl
		checks, err := CriticCheck(r.ctx, r.f, crit, r.pol, r.test[:min(len(r.test), c.CheckTasks)], batchTokens)
		if err != nil {
			return nil, err
		}
		PrintCheck(c.Log, "held-out", crit, checks)
		if k == 0 {
			rep.Check = checks
		}
	}
	r.res.Critics = append(r.res.Critics, rep)
	return &best.crit, nil
}

// validate plays the validation tasks with adapter ad and summarises them.
func (r *runner) validate(label string, ad *llama.Adapter) (rl.Summary, Health, error) {
	s, eps, err := rl.Evaluate(r.ctx, r.m, ad, r.tok, r.f.Protocol, r.val, r.f.Sim, r.f.Scorer,
		rl.EvalOptions{Seeds: r.c.ValSeeds, Temperature: 1, MaxNew: maxNew, Seed: r.c.Seed + 5555, Label: label}, nil)
	return s, EpisodeHealth(eps), err
}

// choosePolicy trains a policy at each learning rate to try with fit
// (which returns the adapter and its last training loss, NaN when it has
// none), validates each, and keeps the best validation success (then pass
// rate).
func (r *runner) choosePolicy(grid, method, name string, configured float64, fit func(ad *llama.Adapter, lr float64) (float64, error)) (*policy, error) {
	var best *policy
	var bestS rl.Summary
	for _, lr := range r.lrs(grid, configured) {
		ad, err := r.m.NewAdapter(llama.LoRAFor(r.c.Rank, r.c.Targets), r.adapterSeed(method))
		if err != nil {
			return nil, err
		}
		loss, err := fit(ad, lr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s, h, err := r.validate(name, ad)
		if err != nil {
			return nil, err
		}
		ls := "-"
		if !math.IsNaN(loss) {
			ls = fmt.Sprintf("%.4f", loss)
		}
		r.logf("%s lr %.0e: last training loss %s; validation pass %.1f%%, success %.1f%%, degenerate %.1f%%, no answer %.1f%%, %.2f turns",
			name, lr, ls, 100*s.PassRate, 100*s.Success, 100*h.Degenerate, 100*h.NoAnswer, h.MeanTurns)
		if best == nil || s.Success > bestS.Success || (s.Success == bestS.Success && s.PassRate > bestS.PassRate) {
			best, bestS = &policy{ad: ad, lr: lr}, s
			if !math.IsNaN(loss) {
				best.trainLoss = loss
			}
		}
	}
	how := "configured"
	if r.c.Select {
		how = "the best validation success (then pass rate) of the grid"
	}
	why := fmt.Sprintf("%s: lr %.0e (%s: validation success %.1f%%, pass %.1f%% on %d tasks)", name, best.lr, how, 100*bestS.Success, 100*bestS.PassRate, len(r.val))
	r.res.Choices = append(r.res.Choices, why)
	r.logf("chosen: %s", why)
	return best, r.m.SavePEFT(best.ad, filepath.Join(r.c.OutDir, method))
}

// trainRFT is rejection fine-tuning: SFT on the successful rollouts.
func (r *runner) trainRFT() (*policy, error) {
	ex, err := rl.RFTExamples(r.tok, r.f.Protocol.System, r.rlTrain)
	if err != nil {
		return nil, err
	}
	r.header("rejection fine-tuning: SFT on the %d successful rollouts, LoRA r=%d", len(ex), r.c.Rank)
	if len(ex) == 0 {
		r.logf("skipped: no successful rollout")
		return nil, nil
	}
	return r.choosePolicy("rft", "rft", "rejection fine-tuning", r.c.LR.RFT, func(ad *llama.Adapter, lr float64) (float64, error) {
		steps := max(20, 2*len(ex)*100/2048)
		return math.NaN(), rl.SupervisedFT(r.m, ad, ex, rl.SFTOptions{Steps: steps, BatchTokens: 2048, MaxLen: 256, LR: lr, Seed: r.c.Seed}, nil)
	})
}

// trainMTDPO is the multi-turn DPO baseline.
func (r *runner) trainMTDPO() (*policy, error) {
	pairs, err := rl.TrajectoryPairs(r.tok, r.f.Protocol.System, r.rlTrain)
	if err != nil {
		return nil, err
	}
	r.header("multi-turn DPO: %d trajectory pairs, LoRA r=%d", len(pairs), r.c.Rank)
	if len(pairs) == 0 {
		r.logf("skipped: no trajectory pairs")
		return nil, nil
	}
	return r.choosePolicy("mtdpo", "mtdpo", "multi-turn DPO", r.c.LR.DPO, func(ad *llama.Adapter, lr float64) (float64, error) {
		o := r.prefOptions("multi-turn DPO step", rl.RefActorEpochs, 0, lr)
		o.Progress = nil
		st, err := rl.TrainPreferences(r.m, ad, pairs, o)
		return st.LastLoss, err
	})
}

// trainActor is SWEET-RL's actor: turn-wise DPO on best-of-N candidates
// ranked by crit.
func (r *runner) trainActor(key string, crit rl.Critic) (*policy, error) {
	c := r.c
	desc := Describe(crit)
	r.header("actor (%s): %d candidates per turn on %.0f%% of the agent turns, ranked by %s", key, c.Candidates, 100*c.DataFraction, desc)
	pairs, st, err := rl.ActorPairs(r.rlTrain, r.pol, crit, rl.ActorOptions{Protocol: r.f.Protocol, Candidates: c.Candidates,
		PairsPerTurn: rl.RefPairsPerTurn, DataFraction: c.DataFraction, BatchTokens: batchTokens, Seed: c.Seed, Progress: c.Log})
	if err != nil {
		return nil, fmt.Errorf("actor: %w", err)
	}
	r.logf("actor: %d turns, %d pairs (%d identical pairs dropped), mean advantage spread %.3f", st.Turns, st.Pairs, st.TiedPairs, st.MeanSpread)
	if len(pairs) == 0 {
		return nil, nil
	}
	nll := "reply"
	if c.NLLSequence {
		nll = "whole sequence"
	}
	p, err := r.choosePolicy("actor", key, fmt.Sprintf("SWEET-RL actor (%s, NLL over the %s)", key, nll), c.LR.Actor, func(ad *llama.Adapter, lr float64) (float64, error) {
		o := r.prefOptions("actor step", rl.RefActorEpochs, rl.RefActorNLL, lr)
		o.Progress = nil
		st, err := rl.TrainPreferences(r.m, ad, pairs, o)
		return st.LastLoss, err
	})
	if err == nil && c.CheckValues > 0 && r.arith.Actor == nil { // the first actor: the main critic's
		err = r.arithActor(key, p, pairs)
	}
	return p, err
}
