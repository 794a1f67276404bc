package rl

import (
	"math"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
)

// PairEval is how a trained scorer does on held-out preference pairs.
type PairEval struct {
	Pairs int
	// Accuracy is the fraction of pairs whose margin
	// (s_θ⁺ − s_ref⁺) − (s_θ⁻ − s_ref⁻) is positive; Loss the mean
	// −log σ(β·margin).
	Accuracy, Loss float64
	// Drift is the mean over the scored tokens of every sequence of
	// |log π_θ(token) − log π_ref(token)|: how far the model moved from its
	// reference, in nats per token.
	Drift float64
}

// EvalPairs evaluates model m with adapter ad against its frozen reference
// (refModel with refAdapter) on held-out pairs, with the preference loss's
// β.
func EvalPairs(m *llama.Model, ad *llama.Adapter, refModel *llama.Model, refAdapter *llama.Adapter, pairs []PrefPair, beta float64, batchTokens int) (PairEval, error) {
	ev := PairEval{Pairs: len(pairs)}
	if len(pairs) == 0 {
		return ev, nil
	}
	seqs := make([]Seq, 0, 2*len(pairs))
	for _, p := range pairs {
		seqs = append(seqs, p.Chosen, p.Rejected)
	}
	th, err := tokenLogps(m, ad, seqs, batchTokens)
	if err != nil {
		return ev, err
	}
	ref, err := tokenLogps(refModel, refAdapter, seqs, batchTokens)
	if err != nil {
		return ev, err
	}
	score := func(k int, lp []float32) float64 {
		var s float64
		for i, w := range seqs[k].W {
			s += float64(w) * float64(lp[i])
		}
		return s
	}
	var drift float64
	var tokens int
	for k, s := range seqs {
		for i, w := range s.W {
			if w != 0 {
				drift += math.Abs(float64(th[k][i]) - float64(ref[k][i]))
				tokens++
			}
		}
	}
	for j := range pairs {
		c, r := 2*j, 2*j+1
		margin := (score(c, th[c]) - score(c, ref[c])) - (score(r, th[r]) - score(r, ref[r]))
		if margin > 0 {
			ev.Accuracy++
		}
		l, _, _ := sweetrl.PreferenceLoss(margin, 0, 0, 0, beta)
		ev.Loss += l
	}
	n := float64(len(pairs))
	ev.Accuracy /= n
	ev.Loss /= n
	ev.Drift = drift / float64(max(tokens, 1))
	return ev, nil
}

// EvalValuePairs evaluates a value-head critic on held-out pairs: the
// fraction with V(chosen) > V(rejected), and the mean −log σ(V⁺ − V⁻).
// Drift is not defined for it and stays 0.
func EvalValuePairs(m *llama.Model, ad *llama.Adapter, v *ValueHead, pairs []PrefPair, batchTokens int) (PairEval, error) {
	ev := PairEval{Pairs: len(pairs)}
	if len(pairs) == 0 {
		return ev, nil
	}
	seqs := make([]Seq, 0, 2*len(pairs))
	for _, p := range pairs {
		seqs = append(seqs, p.Chosen, p.Rejected)
	}
	vals, err := v.Values(m, ad, seqs, batchTokens)
	if err != nil {
		return ev, err
	}
	for j := range pairs {
		if vals[2*j] > vals[2*j+1] {
			ev.Accuracy++
		}
		l, _, _ := sweetrl.PreferenceLoss(vals[2*j], 0, vals[2*j+1], 0, 1)
		ev.Loss += l
	}
	ev.Accuracy /= float64(len(pairs))
	ev.Loss /= float64(len(pairs))
	return ev, nil
}
