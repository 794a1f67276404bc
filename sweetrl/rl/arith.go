package rl

import (
	"errors"
	"fmt"
	"math"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// The values an independent implementation of the algorithm recomputes
// from a saved run (the base model's weights, the adapters, the token ids):
// what TrainPreferences computes on a few pairs, and what a Critic's
// advantage gives a few candidates. Nothing here changes a run: no draw
// from any generator, no update of any weight.

// ArithSeq is one sequence of a preference pair: its tokens, its score
// (the Seq's weighted sum of log-probabilities) under the trained adapter
// and under the frozen reference (the base without the adapter), and, for
// each agent turn (a run of consecutive weighted tokens), the turn's mean
// log-ratio (1/L_t)·Σ_l [log π_θ − log π_ref] over its L_t tokens.
type ArithSeq struct {
	IDs   []int32   `json:"ids"`
	Score float64   `json:"score"`
	Ref   float64   `json:"ref_score"`
	Turns []float64 `json:"turn_logratios"`
}

// ArithPair is one preference pair and its loss,
// −log σ(β·[(s_θ(c) − s_ref(c)) − (s_θ(r) − s_ref(r))]) − λ·mean_c.
type ArithPair struct {
	Chosen   ArithSeq `json:"chosen"`
	Rejected ArithSeq `json:"rejected"`
	Loss     float64  `json:"loss"`
}

// ArithPrefs is what TrainPreferences computes on a few pairs at an
// adapter's weights: each pair's scores and loss, the loss of one step over
// them all (its mean), and that mean's gradient with respect to the
// adapter, which the caller gets through saveGrad of PrefArith.
type ArithPrefs struct {
	Beta        float64     `json:"beta"`
	NLLCoef     float64     `json:"nll_coef"`
	NLLSequence bool        `json:"nll_sequence"`
	Pairs       []ArithPair `json:"pairs"`
	// StepLoss is the mean loss over the pairs as the training step
	// computes it (the sum of the pairs' losses, each scaled by 1/len).
	StepLoss float64 `json:"step_loss"`
}

// PrefArith computes, at adapter ad's weights over model m, what one step of
// TrainPreferences with options o computes on pairs — their scores, their
// losses, and, through the training step's own forward and backward (one
// micro-batch of every pair, each scaled by 1/len(pairs)), the gradient of
// the mean loss with respect to ad — and gives that gradient to saveGrad
// (an adapter shaped like ad) before freeing it. The reference scores are
// the base's, without ad: the frozen reference of a LoRA run.
func PrefArith(m *llama.Model, ad *llama.Adapter, pairs []PrefPair, o PrefOptions, saveGrad func(g *llama.Adapter) error) (ArithPrefs, error) {
	res := ArithPrefs{Beta: o.Beta, NLLCoef: o.NLLCoef, NLLSequence: o.NLLSequence}
	if len(pairs) == 0 || ad == nil {
		return res, errors.New("arithmetic check: no pairs, or no adapter")
	}
	seqs := make([]Seq, 0, 2*len(pairs))
	for _, p := range pairs {
		seqs = append(seqs, p.Chosen, p.Rejected)
	}
	theta, err := tokenLogps(m, ad, seqs, o.BatchTokens)
	if err != nil {
		return res, err
	}
	base, err := tokenLogps(m, nil, seqs, o.BatchTokens)
	if err != nil {
		return res, err
	}
	ref := make([]float64, len(seqs))
	side := func(k int) ArithSeq {
		s := seqs[k]
		ref[k] = weightedSum(s, base[k][1:])
		return ArithSeq{IDs: s.IDs, Score: weightedSum(s, theta[k][1:]), Ref: ref[k], Turns: turnLogRatios(s, theta[k], base[k])}
	}
	for j := range pairs {
		c, r := side(2*j), side(2*j+1)
		loss, _, _ := sweetrl.PreferenceLoss(c.Score, c.Ref, r.Score, r.Ref, o.Beta)
		if o.NLLCoef != 0 {
			// −λ·mean log-probability of the chosen reply, or of every token
			// of the chosen sequence after the first (scored afresh: theta
			// holds the weighed tokens' log-probabilities only).
			unit := unitWeights(seqs[2*j])
			if o.NLLSequence {
				unit = allWeights(seqs[2*j])
			}
			lp, err := Scores(m, ad, []Seq{unit}, o.BatchTokens)
			if err != nil {
				return res, err
			}
			loss -= o.NLLCoef * lp[0] / float64(unit.Tokens())
		}
		res.Pairs = append(res.Pairs, ArithPair{Chosen: c, Rejected: r, Loss: loss})
	}

	tp, err := trainer.NewParams(m, ad, o.AdamW, nil)
	if err != nil {
		return res, err
	}
	defer tp.Free()
	tp.Opt.ZeroGrad()
	idx := make([]int, len(pairs))
	for i := range idx {
		idx[i] = i
	}
	ms, err := prefMicroBatch(m, ad, tp, pairs, ref, idx, o, 1/float64(len(pairs)))
	if err != nil {
		return res, fmt.Errorf("arithmetic check: %w", err)
	}
	res.StepLoss = ms.loss
	return res, saveGrad(tp.AdapterGrads)
}

// turnLogRatios returns, for each run of consecutive weighted tokens of s,
// the mean over the run of theta − ref (per-token log-probabilities, index
// i for token i).
func turnLogRatios(s Seq, theta, ref []float32) []float64 {
	out := []float64{}
	for i := 1; i < len(s.IDs); {
		if s.W[i] == 0 {
			i++
			continue
		}
		j, sum := i, 0.0
		for ; j < len(s.IDs) && s.W[j] != 0; j++ {
			sum += float64(theta[j]) - float64(ref[j])
		}
		out = append(out, sum/float64(j-i))
		i = j
	}
	return out
}

// ArithAdvantage is what Critic.Advantages gives the candidate replies to
// one dialogue, and the sequences it reads: each candidate after the
// ground truth and the dialogue (the critic's view, CriticIDs) and after
// the dialogue alone (the policy's view, PolicyIDs, for the policy
// baseline).
type ArithAdvantage struct {
	Baseline   string    `json:"baseline"`
	Candidates []string  `json:"candidates"`
	CriticIDs  [][]int32 `json:"critic_ids"`
	PolicyIDs  [][]int32 `json:"policy_ids"`
	Advantages []float64 `json:"advantages"`
}

// AdvantageArith returns the critic's advantages of the candidate replies
// to the dialogue before (an episode of task up to an agent turn), as
// Advantages computes them, with the sequences they are computed from. It
// refuses a value-head critic, whose advantage is no log-ratio.
func (c Critic) AdvantageArith(pol *Sampler, system string, task sweetrl.Task, before []sweetrl.Turn, cands []string, batchTokens int) (ArithAdvantage, error) {
	res := ArithAdvantage{Baseline: c.Baseline.String(), Candidates: cands}
	if c.Head != nil {
		return res, errors.New("arithmetic check: a value-head critic's advantage is its value")
	}
	adv, err := c.Advantages(pol, system, task, before, cands, batchTokens)
	if err != nil {
		return res, err
	}
	res.Advantages = adv
	prompt := withSystem(system, sweetrl.TurnsToMessages(before))
	prefix := criticPrefix(pol.Tok, task.GroundTruth)
	for _, out := range cands {
		msgs := append(prompt[:len(prompt):len(prompt)], tokenizer.Message{Role: sweetrl.RoleAssistant, Content: out})
		cs, err := lastTurnSeq(pol.Tok, prefix, msgs, mean)
		if err != nil {
			return res, err
		}
		ps, err := lastTurnSeq(pol.Tok, nil, msgs, sum)
		if err != nil {
			return res, err
		}
		res.CriticIDs = append(res.CriticIDs, cs.IDs)
		res.PolicyIDs = append(res.PolicyIDs, ps.IDs)
	}
	for i, a := range adv {
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return res, fmt.Errorf("arithmetic check: candidate %d's advantage is %v", i, a)
		}
	}
	return res, nil
}
