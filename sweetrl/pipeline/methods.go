package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

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
	noInfo    bool // the ablation without the training-time information
}

// policy is a trained policy adapter and how it was chosen.
type policy struct {
	ad  *llama.Adapter
	set Setting
	fit fitStats
}

// fitStats is what training a policy reports: its last training loss
// (NaN when it has none) and, for a preference method, the last epoch's
// mean log-ratios of the chosen and the rejected sides.
type fitStats struct {
	loss             float64
	pref             bool
	chosen, rejected float64
}

// row is a method of the table: its name, its adapter's directory (""
// for the SFT start), the trained policy, or why it was skipped; agent,
// when set, plays instead of a policy (the best-of-N diagnostic), and
// note says what a diagnostic row is.
type row struct {
	name, key string
	pol       *policy
	skipped   string
	agent     func(s *rl.Sampler) rl.BatchAgent
	note      string
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
	if c.Ablations {
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
	var main *rl.Critic // the paper's critic, for the diagnostics
	for _, sp := range specs {
		cr, err := r.trainCritic(sp)
		if err != nil {
			return err
		}
		if sp.key == "critic" {
			main = cr
		}
		baselines := []rl.AdvantageBaseline{c.Baseline}
		if sp.score == rl.ScoreTrajectory && !sp.value {
			baselines = []rl.AdvantageBaseline{rl.BaselinePolicy} // the released code's recipe whole
		}
		if c.Ablations && sp.key == "critic" {
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
	if c.Diagnostics {
		diag, err := r.diagnostics(main)
		if err != nil {
			return err
		}
		rows = append(rows, diag...)
	}
	return r.evaluate(rows)
}

// The diagnostic rows' names.
const (
	RowBestOfN = "critic-guided best-of-N (diagnostic)"
	RowOracle  = "oracle-advantage actor (diagnostic)"
	RowNoInfo  = "SWEET-RL, critic without the ground truth"
	RowRPO     = "SWEET-RL, RPO (NLL weight 1 on the chosen reply)"
)

// diagnostics trains the rows that locate the bottleneck: the SFT policy
// with the paper's critic choosing each turn among N samples (no actor
// training), an actor trained on the same candidates ranked by the
// family's exact value instead of a critic (what a perfect critic gives
// the actor stage), the critic without the training-time information and
// its actor, and the actor with RPO's NLL weight.
func (r *runner) diagnostics(main *rl.Critic) ([]row, error) {
	c := r.c
	var rows []row
	system := r.f.Protocol.System
	if main == nil {
		rows = append(rows, row{name: RowBestOfN, skipped: "no critic pairs"})
	} else {
		crit := *main
		rows = append(rows, row{name: RowBestOfN, note: fmt.Sprintf("the SFT policy; of %d samples per turn the critic's highest advantage is played (the critic reads the ground truth)", c.BestOfN),
			agent: func(s *rl.Sampler) rl.BatchAgent {
				s.MaxBatch = 256
				return &rl.BestOfN{Policy: s, N: c.BestOfN, Advantage: rl.CriticAdvantage(crit, s, system, batchTokens)}
			}})
	}
	if r.f.Value == nil {
		rows = append(rows, row{name: RowOracle, key: "actor-oracle", skipped: "the family has no exact value"})
	} else {
		r.header("oracle-advantage actor: the actor's candidates ranked by the exact value of each reply when the scripted agent plays on")
		p, err := r.trainRanked("actor-oracle", "oracle-advantage actor", r.oracle(), true, rl.RefActorNLL, c.NLLSequence)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{name: RowOracle, key: "actor-oracle", pol: p, skipped: skipIf(p, "no turn pairs"),
			note: "candidates ranked by the exact value under the scripted agent's continuation (reads the hidden keys)"})
	}
	cr, err := r.trainCritic(criticSpec{key: "critic-noinfo", name: "without the ground truth", score: c.Score, noInfo: true})
	if err != nil {
		return nil, err
	}
	if cr == nil {
		rows = append(rows, row{name: RowNoInfo, key: "actor-noinfo", skipped: "no critic pairs"})
	} else {
		p, err := r.trainActor("actor-noinfo", *cr)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{name: RowNoInfo, key: "actor-noinfo", pol: p, skipped: skipIf(p, "no turn pairs")})
	}
	if main == nil {
		rows = append(rows, row{name: RowRPO, key: "actor-rpo", skipped: "no critic pairs"})
	} else {
		r.header("RPO-style actor: the paper's critic's pairs, NLL weight 1 on the chosen reply")
		p, err := r.trainRanked("actor-rpo", "SWEET-RL actor, RPO", rl.CriticAdvantage(*main, r.pol, system, batchTokens), false, 1, false)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{name: RowRPO, key: "actor-rpo", pol: p, skipped: skipIf(p, "no turn pairs")})
	}
	return rows, nil
}

// oracle is the family's exact value of each candidate reply.
func (r *runner) oracle() rl.AdvantageFunc {
	return func(task sweetrl.Task, before []sweetrl.Turn, cands []string) ([]float64, error) {
		memo := map[string]float64{}
		out := make([]float64, len(cands))
		for i, cand := range cands {
			v, ok := memo[cand]
			if !ok {
				var err error
				if v, err = r.f.Value(task, before, cand); err != nil {
					return nil, err
				}
				memo[cand] = v
			}
			out[i] = v
		}
		return out, nil
	}
}

// ResultsFile is the file a run writes its table to, in its directory.
const ResultsFile = "results.json"

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
		out.Note = rw.note
		if p := rw.pol; p != nil {
			ad, out.LR = p.ad, p.set.LR
			if !math.IsNaN(p.fit.loss) {
				out.TrainLoss = p.fit.loss
			}
			set := p.set
			out.Setting = &set
			if p.fit.pref {
				out.ChosenLogRatio, out.RejectedLogRatio = &p.fit.chosen, &p.fit.rejected
			}
		}
		s, eps, err := rl.Evaluate(r.ctx, r.m, ad, r.tok, r.f.Protocol, r.test, r.f.Sim, r.f.Scorer,
			rl.EvalOptions{Seeds: c.EvalSeeds, Temperature: 1, MaxNew: maxNew, Seed: c.Seed + 7777, Label: rw.name, Agent: rw.agent}, c.Log)
		if err != nil {
			return fmt.Errorf("evaluating %s: %w", rw.name, err)
		}
		if err := sweetrl.SaveTrajectories(filepath.Join(c.OutDir, fmt.Sprintf("eval-%d.jsonl.zst", i)), eps); err != nil {
			return err
		}
		h := EpisodeHealth(eps)
		out.Summary, out.Health = &s, &h
		out.Outcomes = Outcomes(eps)
		r.res.Rows = append(r.res.Rows, out)
	}
	r.header("results on %d held-out tasks of the %s family (seed %d; %s)", len(r.test), r.f.Name, c.Seed, r.res.Machine)
	PrintTable(c.Log, &r.res)
	PrintComparisons(c.Log, Compare([]*Result{&r.res}))
	fmt.Fprintf(c.Log, "(total time %s)\n", clock(timeSince(r.start)))
	js, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(c.OutDir, ResultsFile), append(js, '\n'), 0o644)
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
	fmt.Fprintf(w, "%-52s %-15s %-15s %6s %6s %8s %9s %8s %8s\n", "method", "pass rate", "success", "degen", "no-ans", "lr", "train loss", "Δ chosen", "Δ reject")
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
		dc, dr := "-", "-"
		if rw.ChosenLogRatio != nil {
			dc, dr = fmt.Sprintf("%+.3f", *rw.ChosenLogRatio), fmt.Sprintf("%+.3f", *rw.RejectedLogRatio)
		}
		fmt.Fprintf(w, "%-52s %5.1f%% ± %-5.1f %5.1f%% ± %-5.1f %5.1f%% %5.1f%% %8s %9s %8s %8s\n", rw.Method,
			100*s.PassRate, 100*s.PassCI, 100*s.Success, 100*s.SuccessCI, 100*rw.Health.Degenerate, 100*rw.Health.NoAnswer, lr, loss, dc, dr)
	}
	if len(res.Rows) > 0 && res.Rows[0].Summary != nil {
		fmt.Fprintf(w, "(95%% confidence intervals over %d tasks, %d episodes per method; degen: episodes with a reply that is not text; no-ans: episodes without an answer; "+
			"Δ chosen, Δ reject: the kept epoch's mean log-ratio log π/π_ref of the chosen and the rejected sides, nats)\n",
			res.Rows[0].Summary.Tasks, res.Rows[0].Summary.Episodes)
	}
	for _, rw := range res.Rows {
		if rw.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", rw.Method, rw.Note)
		}
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

// criticSettings returns the critic's settings to try and whether each
// keeps its best epoch on validation: with Config.Settings, that many of
// the critic's space, each judged after its last epoch; else each
// learning rate to try (lrs) at β 0.1 for CriticEpochs, keeping the best.
func (r *runner) criticSettings() ([]Setting, bool) {
	c := r.c
	def := Setting{LR: c.LR.Critic, Beta: rl.RefBeta, Epochs: c.CriticEpochs}
	if c.Settings >= 2 {
		return Settings("critic", def, c.Settings), false
	}
	var out []Setting
	for _, lr := range r.lrs("critic", c.LR.Critic) {
		s := def
		s.LR = lr
		out = append(out, s)
	}
	return out, true
}

// trainCritic trains the critic sp at each setting to try (criticSettings),
// keeping each run's best epoch on the validation split by c.CriticSelect
// where the settings say so, and returns the best run's critic (nil when
// there are no pairs).
func (r *runner) trainCritic(sp criticSpec) (*rl.Critic, error) {
	c := r.c
	pairsOf := func(trajs []sweetrl.Trajectory) ([]rl.PrefPair, error) {
		if sp.noInfo {
			return rl.Rules{}.CriticPairsWithoutInfo(r.tok, r.f.Protocol.System, trajs, sp.score)
		}
		return rl.CriticPairs(r.tok, r.f.Protocol.System, trajs, sp.score)
	}
	tr, err := pairsOf(r.rlTrain)
	if err != nil {
		return nil, err
	}
	val, err := pairsOf(r.rlVal)
	if err != nil {
		return nil, err
	}
	head := "log-probability"
	if sp.value {
		head = "value-head"
	}
	info := "ground truth in its prompt"
	if sp.noInfo {
		info = "no ground truth"
	}
	sets, keepBest := r.criticSettings()
	r.header("critic (%s, %s): Bradley–Terry on %d trajectory pairs (%d validation pairs), LoRA r=%d, %s, %d settings",
		sp.name, head, len(tr), len(val), c.Rank, info, len(sets))
	if len(tr) == 0 {
		r.logf("skipped: no task has a successful rollout")
		return nil, nil
	}
	type run struct {
		crit  rl.Critic
		epoch int
		ev    CriticEval
		set   Setting
	}
	var best *run
	valCheck := r.val[:min(len(r.val), c.CheckTasks)]
	for _, set := range sets {
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
		cur := run{set: set}
		o := r.prefOptions("critic step", set.Epochs, 0, set.LR)
		o.Beta = set.Beta
		o.AfterEpoch = func(epoch int, st rl.PrefStats) error {
			if !keepBest && epoch < set.Epochs {
				return nil
			}
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
				crit := rl.Critic{Model: r.m, Adapter: ad, Head: vh, Baseline: c.Baseline, WithoutInfo: sp.noInfo}
				if ev.Check, err = CriticCheck(r.ctx, r.f, crit, r.pol, valCheck, batchTokens); err != nil {
					return err
				}
				check = fmt.Sprintf(", check %s%%", CheckSummary(ev.Check))
			}
			mark := ""
			if keep == nil || c.CriticSelect.Better(ev, cur.ev) {
				keep, cur.epoch, cur.ev, mark = take(r.m.Backend(), ad, vh), epoch, ev, "  (best so far)"
			}
			what := fmt.Sprintf("lr %.0e", set.LR)
			if !keepBest {
				what, mark = set.String()+",", ""
			}
			r.logf("critic %s epoch %d: train loss %.4f, accuracy %.3f; validation accuracy %.3f, loss %.4f, drift %.3f nats/token%s%s",
				what, epoch, st.LastLoss, st.LastAcc, ev.Pairs.Accuracy, ev.Pairs.Loss, ev.Pairs.Drift, check, mark)
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
		cur.crit = rl.Critic{Model: r.m, Adapter: ad, Head: vh, Baseline: c.Baseline, WithoutInfo: sp.noInfo}
		checks := cur.ev.Check
		if checks == nil {
			if checks, err = CriticCheck(r.ctx, r.f, cur.crit, r.pol, valCheck, batchTokens); err != nil {
				return nil, err
			}
		}
		if keepBest {
			r.logf("critic lr %.0e: kept epoch %d; critic check on validation tasks %s%%", set.LR, cur.epoch, CheckSummary(checks))
		} else {
			r.logf("critic %s: critic check on validation tasks %s%%", set, CheckSummary(checks))
		}
		if best == nil || c.CriticSelect.Better(cur.ev, best.ev) {
			cp := cur
			best = &cp
		}
	}
	var why string
	if keepBest {
		configured := ""
		if !c.Select && !c.SelectCritic {
			configured = " (configured)"
		}
		why = fmt.Sprintf("critic (%s): lr %.0e%s, epoch %d of %d — %s", sp.name, best.set.LR, configured, best.epoch, c.CriticEpochs, c.CriticSelect.Describe())
	} else {
		why = fmt.Sprintf("critic (%s): %s, of %d settings — %s", sp.name, best.set, len(sets), c.CriticSelect.Describe())
	}
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
		if err := r.arithCritic(sp, best.crit, tr, best.set); err != nil {
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
	rep := CriticReport{Name: sp.name, LR: best.set.LR, Epoch: best.epoch, Val: best.ev.Pairs}
	if !keepBest {
		set := best.set
		rep.Setting = &set
	}
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

// policySettings returns a policy's settings to try: with Config.Settings,
// that many of the space kind (def first); else def at each learning rate
// of the grid with Select, or def alone.
func (r *runner) policySettings(grid, kind string, def Setting) []Setting {
	if r.c.Settings >= 2 {
		return Settings(kind, def, r.c.Settings)
	}
	var out []Setting
	for _, lr := range r.lrs(grid, def.LR) {
		s := def
		s.LR = lr
		out = append(out, s)
	}
	return out
}

// fitFunc trains adapter ad at setting s, recording its metrics in
// metricsDir, and reports the run; after, when not nil, is called at the
// end of each epoch (1, 2, …, s.Epochs) with that epoch's statistics and
// the adapter holding its weights.
type fitFunc func(ad *llama.Adapter, s Setting, metricsDir string, after func(epoch int, fs fitStats) error) (fitStats, error)

// validated is a policy's validation: its summary and its episodes' health.
type validated struct {
	s rl.Summary
	h Health
}

// better says whether v is better than w: a higher validation success,
// then a higher pass rate.
func (v validated) better(w validated) bool {
	return v.s.Success > w.s.Success || (v.s.Success == w.s.Success && v.s.PassRate > w.s.PassRate)
}

// validation validates adapter ad: r.validator where set (a test's), else
// r.validate.
func (r *runner) validation(label string, ad *llama.Adapter) (validated, error) {
	f := r.validator
	if f == nil {
		f = r.validate
	}
	s, h, err := f(label, ad)
	return validated{s, h}, err
}

// choosePolicy trains a policy at each setting to try (policySettings)
// with fit, validates each, and keeps the best validation success (then
// pass rate). With Config.EpochSelect each setting is validated after
// every epoch and its result is its best epoch by the same rule, whose
// weights it keeps (Setting.Kept); else after its last epoch. The i-th
// setting's training metrics go to OutDir/metrics/method-i.
func (r *runner) choosePolicy(grid, kind, method, name string, def Setting, fit fitFunc) (*policy, error) {
	var best *policy
	var bestV validated
	sets := r.policySettings(grid, kind, def)
	for i, set := range sets {
		ad, err := r.m.NewAdapter(llama.LoRAFor(r.c.Rank, r.c.Targets), r.adapterSeed(method))
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("lr %.0e", set.LR)
		if r.c.Settings >= 2 {
			what = set.String()
		}
		var keep snapshot // the best epoch's weights so far, with EpochSelect
		var cur *policy
		var curV validated
		report := func(epoch int, fs fitStats) error {
			v, err := r.validation(name, ad)
			if err != nil {
				return err
			}
			mark, at, loss := "", "", "last training loss"
			if r.c.EpochSelect {
				at, loss = fmt.Sprintf(", epoch %d", epoch), "training loss"
			}
			if cur == nil || v.better(curV) {
				kept := set
				if r.c.EpochSelect {
					keep = take(r.m.Backend(), ad, nil)
				}
				if r.c.EpochSelect && set.Epochs > 1 { // one epoch is no choice
					kept.Kept, mark = epoch, "  (best so far)"
				}
				cur, curV = &policy{ad: ad, set: kept, fit: fs}, v
			}
			ls := "-"
			if !math.IsNaN(fs.loss) {
				ls = fmt.Sprintf("%.4f", fs.loss)
			}
			if fs.pref {
				ls += fmt.Sprintf(", log-ratios chosen %+.3f, rejected %+.3f", fs.chosen, fs.rejected)
			}
			r.logf("%s %s%s: %s %s; validation pass %.1f%%, success %.1f%%, degenerate %.1f%%, no answer %.1f%%, %.2f turns%s",
				name, what, at, loss, ls, 100*v.s.PassRate, 100*v.s.Success, 100*v.h.Degenerate, 100*v.h.NoAnswer, v.h.MeanTurns, mark)
			return nil
		}
		var after func(int, fitStats) error
		if r.c.EpochSelect {
			after = report
		}
		fs, err := fit(ad, set, filepath.Join(r.c.OutDir, "metrics", fmt.Sprintf("%s-%d", method, i)), after)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r.c.EpochSelect {
			if keep == nil {
				panic(fmt.Sprintf("pipeline: %s at %s: training ended without validating an epoch", name, set))
			}
			keep.restore(r.m.Backend(), ad, nil)
			if set.Epochs > 1 {
				r.logf("%s %s: kept epoch %d of %d", name, what, cur.set.Kept, set.Epochs)
			}
		} else if err := report(set.Epochs, fs); err != nil {
			return nil, err
		}
		if best == nil || curV.better(bestV) {
			best, bestV = cur, curV
		}
	}
	how := "configured"
	switch {
	case r.c.Settings >= 2:
		how = fmt.Sprintf("the best validation success (then pass rate) of %d settings", len(sets))
	case r.c.Select:
		how = "the best validation success (then pass rate) of the grid"
	}
	if r.c.EpochSelect {
		how += ", each at its best epoch"
	}
	what := fmt.Sprintf("lr %.0e", best.set.LR)
	switch {
	case r.c.Settings >= 2:
		what = best.set.String()
	case best.set.Kept > 0:
		what += fmt.Sprintf(", epoch %d of %d kept", best.set.Kept, best.set.Epochs)
	}
	why := fmt.Sprintf("%s: %s (%s: validation success %.1f%%, pass %.1f%% on %d tasks)", name, what, how, 100*bestV.s.Success, 100*bestV.s.PassRate, len(r.val))
	r.res.Choices = append(r.res.Choices, why)
	r.logf("chosen: %s", why)
	return best, r.m.SavePEFT(best.ad, filepath.Join(r.c.OutDir, method))
}

// epochEnds maps the step that ends each of epochs epochs of a run of
// steps optimizer steps to its epoch: epoch e ends at step round(e·steps/
// epochs), the last at the run's last step (of epochs ending at one step,
// the last).
func epochEnds(steps, epochs int) map[int]int {
	out := map[int]int{}
	for e := 1; e <= epochs; e++ {
		out[int(math.Round(float64(e)*float64(steps)/float64(epochs)))] = e
	}
	return out
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
	return r.choosePolicy("rft", "rft", "rft", "rejection fine-tuning", Setting{LR: r.c.LR.RFT, Epochs: 2}, func(ad *llama.Adapter, s Setting, dir string, after func(int, fitStats) error) (fitStats, error) {
		steps := max(20, s.Epochs*len(ex)*100/2048)
		o := rl.SFTOptions{Steps: steps, BatchTokens: 2048, MaxLen: 256, LR: s.LR, Seed: r.c.Seed, MetricsDir: dir}
		if after != nil { // each epoch ends at its share of the whole run's steps (and schedule)
			ends := epochEnds(steps, s.Epochs)
			o.AfterStep = func(step int) error {
				if e, ok := ends[step]; ok {
					return after(e, fitStats{loss: math.NaN()})
				}
				return nil
			}
		}
		return fitStats{loss: math.NaN()}, rl.SupervisedFT(r.m, ad, ex, o, nil)
	})
}

// prefDefault is the default setting of a DPO-trained policy: the
// reference's β and single epoch over every pair, at learning rate lr.
func prefDefault(lr float64) Setting {
	return Setting{LR: lr, Beta: rl.RefBeta, Epochs: rl.RefActorEpochs, Share: 1}
}

// fitPref trains ad on share s.Share of pairs (a seeded subset, in their
// order) with the setting's learning rate, β and epochs, the NLL term nll
// (over the whole sequence with nllSeq), recording metrics in dir; after,
// when not nil, is called after each epoch (see fitFunc).
func (r *runner) fitPref(ad *llama.Adapter, pairs []rl.PrefPair, s Setting, nll float64, nllSeq bool, dir string, after func(int, fitStats) error) (fitStats, error) {
	o := r.prefOptions("", s.Epochs, nll, s.LR)
	o.Progress, o.Beta, o.NLLSequence, o.MetricsDir = nil, s.Beta, nllSeq, dir
	if after != nil {
		o.AfterEpoch = func(epoch int, st rl.PrefStats) error { return after(epoch, prefFit(st)) }
	}
	st, err := rl.TrainPreferences(r.m, ad, sharePairs(pairs, s.Share, r.c.Seed), o)
	return prefFit(st), err
}

// prefFit is a preference run's fitStats: its last epoch's loss and
// log-ratios.
func prefFit(st rl.PrefStats) fitStats {
	return fitStats{loss: st.LastLoss, pref: true, chosen: st.LastChosen, rejected: st.LastRejected}
}

// sharePairs returns a seeded subset of round(share·n) of the n pairs (at
// least one), in their order; all of them for a share of 0 or 1.
func sharePairs(pairs []rl.PrefPair, share float64, seed uint64) []rl.PrefPair {
	if share <= 0 || share >= 1 {
		return pairs
	}
	n := max(1, int(math.Round(share*float64(len(pairs)))))
	rng := rand.New(rand.NewPCG(seed, 0x7368617265))
	idx := rng.Perm(len(pairs))[:n]
	slices.Sort(idx)
	out := make([]rl.PrefPair, n)
	for i, k := range idx {
		out[i] = pairs[k]
	}
	return out
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
	return r.choosePolicy("mtdpo", "pref", "mtdpo", "multi-turn DPO", prefDefault(r.c.LR.DPO), func(ad *llama.Adapter, s Setting, dir string, after func(int, fitStats) error) (fitStats, error) {
		return r.fitPref(ad, pairs, s, 0, r.c.NLLSequence, dir, after)
	})
}

// candidates returns the actor's candidates, sampled at the first call:
// every actor ranks the same candidates.
func (r *runner) candidates() (*rl.TurnCandidates, error) {
	if r.cands != nil {
		return r.cands, nil
	}
	c := r.c
	var err error
	r.cands, err = rl.SampleTurnCandidates(r.rlTrain, r.pol, rl.ActorOptions{Protocol: r.f.Protocol, Candidates: c.Candidates,
		PairsPerTurn: rl.RefPairsPerTurn, DataFraction: c.DataFraction, BatchTokens: batchTokens, Seed: c.Seed, Progress: c.Log})
	if err != nil {
		return nil, fmt.Errorf("actor: %w", err)
	}
	return r.cands, nil
}

// trainActor is SWEET-RL's actor: turn-wise DPO on best-of-N candidates
// ranked by crit.
func (r *runner) trainActor(key string, crit rl.Critic) (*policy, error) {
	c := r.c
	r.header("actor (%s): %d candidates per turn on %.0f%% of the agent turns, ranked by %s", key, c.Candidates, 100*c.DataFraction, Describe(crit))
	nll := "reply"
	if c.NLLSequence {
		nll = "whole sequence"
	}
	return r.trainRanked(key, fmt.Sprintf("SWEET-RL actor (%s, NLL over the %s)", key, nll), rl.CriticAdvantage(crit, r.pol, r.f.Protocol.System, batchTokens), false, rl.RefActorNLL, c.NLLSequence)
}

// trainRanked trains an actor with turn-wise DPO on the actor's
// candidates ranked by adv (dropEqual: see rl.TurnCandidates.Pairs), with
// NLL weight nll over the whole sequence (nllSeq) or the reply.
func (r *runner) trainRanked(key, name string, adv rl.AdvantageFunc, dropEqual bool, nll float64, nllSeq bool) (*policy, error) {
	cands, err := r.candidates()
	if err != nil {
		return nil, err
	}
	pairs, st, err := cands.Pairs(adv, dropEqual)
	if err != nil {
		return nil, fmt.Errorf("actor: %w", err)
	}
	r.logf("actor: %d turns, %d pairs (%d identical or tied pairs dropped), mean advantage spread %.3f", st.Turns, st.Pairs, st.TiedPairs, st.MeanSpread)
	if len(pairs) == 0 {
		return nil, nil
	}
	p, err := r.choosePolicy("actor", "pref", key, name, prefDefault(r.c.LR.Actor), func(ad *llama.Adapter, s Setting, dir string, after func(int, fitStats) error) (fitStats, error) {
		return r.fitPref(ad, pairs, s, nll, nllSeq, dir, after)
	})
	if err == nil && r.c.CheckValues > 0 && r.arith.Actor == nil { // the first actor: the main critic's
		err = r.arithActor(key, p, pairs)
	}
	return p, err
}
