package rl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/trainer"
)

// PrefPair is a preference of one sequence over another.
type PrefPair struct {
	Chosen, Rejected Seq
}

// PrefOptions control TrainPreferences.
type PrefOptions struct {
	Beta    float64 // β of the loss (0.1 in the reference)
	NLLCoef float64 // coefficient of the chosen side's NLL term (actor: 0.01; 0: none)
	// NLLSequence takes the NLL term's mean over every token of the chosen
	// sequence, its context included, as the reference does (its mask is
	// the attention mask); false takes it over the scored tokens only (the
	// reply, for the actor).
	NLLSequence  bool
	Epochs       int     // passes over the pairs
	PairsPerStep int     // pairs per optimizer step (the reference's batch: 8)
	BatchTokens  int     // tokens per forward pass at most (whole pairs, at least one)
	LR           float64 // peak learning rate
	WarmupFrac   float64 // fraction of the steps spent warming up (0.03)
	MinLRRatio   float64 // cosine floor as a fraction of LR (0.1)
	AdamW        optim.AdamWConfig
	Seed         uint64    // shuffles the pairs each epoch
	Progress     io.Writer // progress lines (nil: none)
	Label        string    // what the progress line calls a step
	// MetricsDir, when not empty, gets the run's metrics.jsonl and a
	// TensorBoard event file, a record per step (see pairLoop).
	MetricsDir string
	// PeakFLOPS is the device's peak FLOP/s for the MFU the metrics
	// record (see metrics.MeterOptions.PeakFLOPS); 0 leaves MFU out.
	PeakFLOPS float64
	// AfterEpoch, when set, is called after each epoch (1, 2, …) with the
	// statistics so far: to validate, and keep the best epoch's weights.
	AfterEpoch func(epoch int, st PrefStats) error
	// Checkpoints, with a RunDir, saves the run there every Every steps
	// and at its end, and resumes it from the newest valid checkpoint
	// there, if any: the weights trained, the optimizer, and the position
	// in the epochs' shuffled orders, so that the resumed run takes the
	// steps an uninterrupted one takes. The frozen reference's scores are
	// those of the model as given, before the checkpoint is restored.
	Checkpoints Checkpoints
	// Comm, when it joins several ranks, trains data parallel: each step's
	// pairs (PairsPerStep per rank) are split across the ranks in rank
	// order, the gradients summed across them, and every rank steps alike;
	// nil trains in one process.
	Comm engine.Communicator
	// Zero is the ZeRO stage of a data-parallel run: 1 shards the
	// optimizer's moments and f32 master weights across Comm's ranks
	// (trainer.NewParamsZero); 0 keeps them whole on every rank.
	Zero int
	// OverlapReduce all-reduces each layer's gradients while the backward
	// of a step's last forward pass goes on, where the backend allows
	// (trainer.Params.OverlapReduce).
	OverlapReduce bool
}

// PrefStats summarise a preference run.
type PrefStats struct {
	Pairs, Steps, Skipped int
	// FirstLoss and LastLoss are the mean loss over the first and the last
	// epoch; FirstAcc and LastAcc the fraction of pairs whose margin
	// (s_θ⁺ − s_ref⁺) − (s_θ⁻ − s_ref⁻) was positive.
	FirstLoss, LastLoss, FirstAcc, LastAcc float64
	// LastChosen and LastRejected are the means over the last epoch's
	// pairs of the chosen and the rejected sides' log-ratios s_θ − s_ref,
	// each measured at its step before the update (0 for the value
	// critic): a negative LastChosen is likelihood displacement, the
	// chosen replies made less likely though preferred.
	LastChosen, LastRejected float64
	// Losses are the steps' losses, each the mean over the step's pairs.
	Losses []float64
}

// String says how a run went: "loss 0.6931 → 0.4012, pair accuracy 0.500
// → 0.812 over 40 steps", and how many steps were skipped for a
// non-finite gradient, if any.
func (st PrefStats) String() string {
	s := fmt.Sprintf("loss %.4f → %.4f, pair accuracy %.3f → %.3f over %d steps", st.FirstLoss, st.LastLoss, st.FirstAcc, st.LastAcc, st.Steps)
	if st.Skipped > 0 {
		s += fmt.Sprintf(" (%d skipped for a non-finite gradient)", st.Skipped)
	}
	return s
}

// DropLong returns the pairs whose sides are both at most maxLen tokens
// long, reusing pairs' storage, and the number of pairs dropped.
func DropLong(pairs []PrefPair, maxLen int) (kept []PrefPair, dropped int) {
	kept = pairs[:0]
	for _, p := range pairs {
		if len(p.Chosen.IDs) <= maxLen && len(p.Rejected.IDs) <= maxLen {
			kept = append(kept, p)
		}
	}
	return kept, len(pairs) - len(kept)
}

// TrainPreferences trains model m — its adapter ad, or every weight when ad
// is nil — on preference pairs with the loss
//
//	L = −log σ(β·[(s_θ(c) − s_ref(c)) − (s_θ(r) − s_ref(r))]) − λ·mean_c
//
// averaged over the pairs of a step, where s is a Seq score, c and r the
// chosen and rejected sequences, s_ref the score under the model before
// training, and mean_c the mean log-probability of c's weighted tokens, or
// of all its tokens with NLLSequence (the NLL term, λ = NLLCoef). Steps follow a warm-up then cosine schedule to
// MinLRRatio·LR, with AdamW. A run whose loss is NaN or infinite for
// trainer.MaxNonFiniteLosses steps in a row stops with an error wrapping
// trainer.ErrDiverged and naming the step.
func TrainPreferences(m *llama.Model, ad *llama.Adapter, pairs []PrefPair, o PrefOptions) (PrefStats, error) {
	return TrainPreferencesContext(context.Background(), m, ad, pairs, o)
}

// TrainPreferencesContext is TrainPreferences, stopping early when ctx is
// cancelled: the step under way is finished and, with o.Checkpoints,
// checkpointed, and the error wraps trainer.ErrInterrupted and names the
// checkpoint, from which a resumed run continues as if it had not stopped.
func TrainPreferencesContext(ctx context.Context, m *llama.Model, ad *llama.Adapter, pairs []PrefPair, o PrefOptions) (PrefStats, error) {
	st := PrefStats{Pairs: len(pairs)}
	if len(pairs) == 0 {
		return st, errors.New("no preference pairs to train on")
	}
	if o.Epochs <= 0 || o.PairsPerStep <= 0 || o.BatchTokens <= 0 || o.Beta <= 0 {
		return st, fmt.Errorf("preference training: %d epochs, %d pairs per step, %d tokens per batch, β %g", o.Epochs, o.PairsPerStep, o.BatchTokens, o.Beta)
	}
	tp, err := trainer.NewParamsZero(m, ad, o.AdamW, nil, o.Comm, o.Zero)
	if err != nil {
		return st, err
	}
	defer tp.Free()
	// Every rank starts from rank 0's weights, its reference included.
	if err := tp.Broadcast(o.Comm); err != nil {
		return st, err
	}
	// The frozen reference: every sequence's score before any update.
	seqs := make([]Seq, 0, 2*len(pairs))
	for _, p := range pairs {
		seqs = append(seqs, p.Chosen, p.Rejected)
	}
	ref, err := Scores(m, ad, seqs, o.BatchTokens)
	if err != nil {
		return st, fmt.Errorf("reference scores: %w", err)
	}
	// pairLoop's tokens are summed over the ranks, so the peak is all of theirs.
	meter := trainer.NewMeter(m, ad, o.PeakFLOPS*float64(ranks(o.Comm)))
	return pairLoop(ctx, pairs, tp, o, 0x70726566, meter, func(idx []int, scale float64) (microStats, error) {
		return prefMicroBatch(m, ad, tp, pairs, ref, idx, o, scale)
	})
}

// Keys of the values a preference run records per step, besides
// metrics.Loss and metrics.LR (means over the step's pairs).
const (
	// PairAcc is the fraction of pairs ranked right: a positive margin.
	PairAcc = "pair_acc"
	// Margin is (s_θ⁺ − s_ref⁺) − (s_θ⁻ − s_ref⁻), without β; for the
	// value critic V(τ⁺) − V(τ⁻).
	Margin = "margin"
	// ChosenLogRatio and RejectedLogRatio are s_θ − s_ref of the chosen
	// and the rejected sequences (not recorded by the value critic).
	ChosenLogRatio   = "chosen_logratio"
	RejectedLogRatio = "rejected_logratio"
	// KL estimates KL(π_ref ‖ π_θ) over the step's sequences, which were
	// sampled from the policy before training, by Schulman's k3
	// estimator e^r − 1 − r with r = s_θ − s_ref (non-negative, unbiased
	// for samples of π_ref); not recorded by the value critic.
	KL = "kl"
)

// microStats is what one forward pass over some of a step's pairs adds.
type microStats struct {
	loss     float64 // the pairs' loss, times the step's scale
	right    float64 // pairs with a positive margin
	margin   float64 // sum of the pairs' margins
	chosen   float64 // sum of s_θ − s_ref over the chosen sequences
	rejected float64 // … and over the rejected ones
	kl       float64 // sum of e^r − 1 − r over both sequences of each pair
	ratios   bool    // chosen, rejected and kl are measured
	tokens   int     // tokens of the pass
}

// pairLoop runs o.Epochs shuffled passes over the pairs, o.PairsPerStep
// pairs to an optimizer step on the warm-up + cosine schedule. micro adds
// to the gradients scale times the loss gradient of the pairs idx (one
// forward pass of about o.BatchTokens tokens), and returns its statistics.
// With o.Comm of W ranks a step takes W·PairsPerStep pairs, the r-th W-th of
// them on rank r, and the ranks' statistics are summed; the caller has given
// every rank the same weights (trainer.Params.Broadcast). With o.MetricsDir
// set rank 0 records each step's loss, lr, PairAcc, Margin, ChosenLogRatio,
// RejectedLogRatio and KL (the last three where micro measures them), and
// meter's performance values. With o.Checkpoints it checkpoints and
// resumes (see PrefOptions.Checkpoints); the run directory's metrics.jsonl
// is then cut back to the step resumed from. Each step ends with a
// trainer.Guard: a diverged run stops, and so does one whose ctx was
// cancelled on any rank (the step's sums carry it), after checkpointing
// the step; weights that are not finite are neither checkpointed nor
// returned as the run's.
func pairLoop(ctx context.Context, pairs []PrefPair, tp *trainer.Params, o PrefOptions, stream uint64, meter *metrics.Meter,
	micro func(idx []int, scale float64) (microStats, error)) (st PrefStats, err error) {
	opt := tp.Opt
	rank, size := 0, 1
	if o.Comm != nil {
		rank, size = o.Comm.Rank(), o.Comm.Size()
	}
	if o.OverlapReduce {
		tp.OverlapReduce(o.Comm)
	}
	ps := prefState{Pairs: len(pairs)}
	var log io.Writer
	if rank == 0 {
		log = o.Progress
	}
	if err := resumePref(o.Checkpoints, tp, o.Comm, &ps, log); err != nil {
		return ps.stats(), err
	}
	perStep := o.PairsPerStep * size
	// The schedule spans the steps taken and those left: the run's steps,
	// unless a resume changed the pairs per step (another number of ranks).
	total := ps.Step + ps.stepsLeft(len(pairs), perStep, o.Epochs)
	sched := optim.Schedule{Peak: o.LR, Warmup: int(math.Ceil(o.WarmupFrac * float64(total))), Total: total, Cosine: true, MinRatio: o.MinLRRatio}
	var prog *metrics.Progress
	if o.Progress != nil {
		if s := tp.DataParallel(); s != "" && rank == 0 {
			fmt.Fprintln(o.Progress, s)
		}
		prog = metrics.NewProgress(o.Progress, metrics.ProgressOptions{Total: int64(total), Label: o.Label})
		defer prog.Done()
	}
	var mw *metrics.Writer // rank 0's alone
	if o.MetricsDir != "" && rank == 0 {
		if err := os.MkdirAll(o.MetricsDir, 0o755); err != nil {
			return ps.stats(), err
		}
		// A new run drops an earlier one's records; a resumed one those
		// past the step it resumes from.
		path := filepath.Join(o.MetricsDir, trainer.MetricsName)
		if _, err := metrics.Truncate(path, int64(ps.Step)); err != nil {
			return ps.stats(), err
		}
		if mw, err = metrics.Create(path, metrics.WriterOptions{EventsDir: o.MetricsDir, FromStep: int64(ps.Step), Restart: ps.Step == 0}); err != nil {
			return ps.stats(), err
		}
		defer func() {
			if cerr := mw.Close(); err == nil {
				err = cerr
			}
		}()
	}
	guard := trainer.Guard{RunDir: o.Checkpoints.RunDir}
	var save func() error // nil on the ranks that take no part in saving
	if rank == 0 || opt.Sharded() {
		save = func() error {
			return tp.SaveCheckpoint(o.Comm, o.Checkpoints.RunDir, ps.Step, o.Checkpoints.Keep, &ps, o.Checkpoints.Compress)
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, stream))
	order := make([]int, len(pairs))
	for i := range order {
		order[i] = i
	}
	for ep := 0; ep < o.Epochs; ep++ {
		// Every epoch's shuffle is drawn, those a resume skips included,
		// so that the epochs after them draw what an uninterrupted run's do.
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if ep < ps.Epoch {
			continue
		}
		if ep > ps.Epoch {
			ps.Epoch, ps.Offset, ps.LossSum, ps.AccSum, ps.ChosenSum, ps.RejectedSum = ep, 0, 0, 0, 0, 0
		}
		for ps.Offset < len(order) {
			start := time.Now()
			all := order[ps.Offset:min(ps.Offset+perStep, len(order))]
			step := all[rank*len(all)/size : (rank+1)*len(all)/size]
			opt.ZeroGrad()
			scale := 1 / float64(len(all))
			var sum microStats
			batches := pairBatches(pairs, step, o.BatchTokens)
			for i, r := range batches {
				if i == len(batches)-1 {
					tp.LastMicroBatch()
				}
				ms, err := micro(step[r[0]:r[1]], scale)
				if err != nil {
					return ps.stats(), err
				}
				sum.loss += ms.loss
				sum.right += ms.right
				sum.margin += ms.margin
				sum.chosen += ms.chosen
				sum.rejected += ms.rejected
				sum.kl += ms.kl
				sum.ratios = ms.ratios
				sum.tokens += ms.tokens
			}
			ratios, stop := 0.0, 0.0
			if sum.ratios {
				ratios = 1
			}
			if ctx.Err() != nil {
				stop = 1
			}
			// The step's sums over every rank: rank 0 records global values,
			// and every rank stops if any was asked to.
			sums := []float64{sum.loss, sum.right, sum.margin, sum.chosen, sum.rejected, sum.kl, float64(sum.tokens), ratios, stop}
			if err := tp.Reduce(o.Comm, sums); err != nil {
				return ps.stats(), err
			}
			sum.loss, sum.right, sum.margin, sum.chosen, sum.rejected, sum.kl = sums[0], sums[1], sums[2], sums[3], sums[4], sums[5]
			sum.tokens, sum.ratios, stop = int(sums[6]), sums[7] > 0, sums[8]
			ps.AccSum += exactFloat(sum.right)
			ps.ChosenSum += exactFloat(sum.chosen)
			ps.RejectedSum += exactFloat(sum.rejected)
			ps.Losses = append(ps.Losses, exactFloat(sum.loss))
			lr := sched.LR(ps.Step)
			res, err := tp.Step(float32(lr), 1)
			if err != nil {
				return ps.stats(), err
			}
			if res.Skipped {
				ps.Skipped++
			}
			ps.Step++
			ps.Offset += len(all)
			ps.LossSum += exactFloat(sum.loss * float64(len(all)))
			secs := time.Since(start).Seconds()
			if mw != nil {
				rec := metrics.Record{Step: int64(ps.Step), Values: map[string]float64{
					metrics.Loss: sum.loss, metrics.LR: lr,
					PairAcc: sum.right * scale, Margin: sum.margin * scale,
				}}
				if sum.ratios {
					rec.Values[ChosenLogRatio] = sum.chosen * scale
					rec.Values[RejectedLogRatio] = sum.rejected * scale
					rec.Values[KL] = sum.kl * scale / 2
				}
				meter.Add(rec.Values, sum.tokens, secs)
				if err := mw.Write(rec); err != nil {
					return ps.stats(), err
				}
			}
			if prog != nil {
				prog.Update(int64(ps.Step), sum.loss, lr, float64(sum.tokens)/secs)
			}
			if err := guard.EndStep(ps.Step, sum.loss, o.Checkpoints.due(ps.Step, total), stop > 0, save); err != nil {
				return ps.stats(), err
			}
		}
		n := float64(len(pairs))
		if ep == 0 {
			ps.FirstLoss, ps.FirstAcc = ps.LossSum/exactFloat(n), ps.AccSum/exactFloat(n)
		}
		ps.LastLoss, ps.LastAcc = ps.LossSum/exactFloat(n), ps.AccSum/exactFloat(n)
		ps.LastChosen, ps.LastRejected = ps.ChosenSum/exactFloat(n), ps.RejectedSum/exactFloat(n)
		if o.AfterEpoch != nil {
			if err := o.AfterEpoch(ep+1, ps.stats()); err != nil {
				return ps.stats(), err
			}
		}
	}
	return ps.stats(), tp.CheckFinite(ps.Step, o.Checkpoints.RunDir)
}

// ranks is the number of ranks c joins: 1 when c is nil.
func ranks(c engine.Communicator) int {
	if c == nil {
		return 1
	}
	return c.Size()
}

// pairBatches splits the pairs of one step (indices into pairs) into
// forward passes of about maxTokens tokens, keeping each pair whole.
func pairBatches(pairs []PrefPair, step []int, maxTokens int) [][2]int {
	return splitTokens(len(step), func(i int) int {
		return len(pairs[step[i]].Chosen.IDs) + len(pairs[step[i]].Rejected.IDs)
	}, maxTokens)
}

// prefMicroBatch runs one forward and backward over the pairs idx, adding
// scale times their loss gradient to tp's gradients, and returns its
// statistics.
func prefMicroBatch(m *llama.Model, ad *llama.Adapter, tp *trainer.Params,
	pairs []PrefPair, ref []float64, idx []int, o PrefOptions, scale float64) (ms microStats, err error) {
	b := m.Backend()
	seqs := make([]Seq, 0, 2*len(idx))
	for _, k := range idx {
		seqs = append(seqs, pairs[k].Chosen, pairs[k].Rejected)
	}
	// The NLL term over the whole chosen sequence needs the log-probability
	// of each of its tokens, not only of those its score weighs.
	var whole []bool
	if o.NLLCoef != 0 && o.NLLSequence {
		whole = make([]bool, len(seqs))
		for j := range idx {
			whole[2*j] = true
		}
	}
	p := packAll(seqs, whole)
	pass, err := m.ForwardTrain(p.bt, ad)
	if err != nil {
		return ms, err
	}
	defer pass.Release()
	logp := engine.ToF32(b, pass.LogP)
	dlogp := make([]float32, len(logp)) // [N]
	for j, k := range idx {
		c, r := 2*j, 2*j+1
		thetaC, thetaR := p.score(seqs, c, logp), p.score(seqs, r, logp)
		l, dC, dR := sweetrl.PreferenceLoss(thetaC, ref[2*k], thetaR, ref[2*k+1], o.Beta)
		rc, rr := thetaC-ref[2*k], thetaR-ref[2*k+1]
		if rc-rr > 0 {
			ms.right++
		}
		ms.margin += rc - rr
		ms.chosen += rc
		ms.rejected += rr
		ms.kl += klK3(rc) + klK3(rr)
		p.addGrad(seqs, c, dC*scale, dlogp)
		p.addGrad(seqs, r, dR*scale, dlogp)
		if o.NLLCoef != 0 {
			// −λ·mean log-prob over the chosen sequence's tokens: every one,
			// or its weighted ones.
			unit := unitWeights(seqs[c])
			if o.NLLSequence {
				unit = allWeights(seqs[c])
			}
			n := float64(unit.Tokens())
			meanC := weightedSum(unit, logp[p.off[c]:]) / n
			l -= o.NLLCoef * meanC
			addUnit(dlogp[p.off[c]:], unit, -o.NLLCoef*scale/n)
		}
		ms.loss += l * scale
	}
	if err := tp.Backward(pass, dlogp); err != nil {
		return ms, err
	}
	ms.ratios = true
	ms.tokens = len(p.bt.IDs)
	return ms, nil
}

// klK3 is Schulman's k3 estimate e^r − 1 − r of KL(π_ref ‖ π_θ) from one
// sample of π_ref with log-ratio r = log π_θ − log π_ref.
func klK3(r float64) float64 { return math.Expm1(r) - r }

// unitWeights returns s with weight 1 on every token s weighs.
func unitWeights(s Seq) Seq {
	w := make([]float32, len(s.W))
	for i, v := range s.W {
		if v != 0 {
			w[i] = 1
		}
	}
	return Seq{IDs: s.IDs, W: w}
}

// allWeights returns s with weight 1 on every token after the first.
func allWeights(s Seq) Seq {
	w := make([]float32, len(s.W))
	for i := 1; i < len(w); i++ {
		w[i] = 1
	}
	return Seq{IDs: s.IDs, W: w}
}

// addUnit adds g to dlogp at the positions predicting s's weighted tokens
// (dlogp starts at s's first position).
func addUnit(dlogp []float32, s Seq, g float64) {
	for i := 1; i < len(s.IDs); i++ {
		if s.W[i] != 0 {
			dlogp[i-1] += float32(g)
		}
	}
}
