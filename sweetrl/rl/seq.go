package rl

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
)

// Seq is a token sequence and the weights of its score:
//
//	score = Σ_{i≥1} W[i] · log π(IDs[i] | IDs[:i])
//
// W[0] must be 0 (the first token is never predicted). A mean over a set of
// tokens has W = 1/n on them; a sum has W = 1.
type Seq struct {
	IDs []int32   // [L] tokens
	W   []float32 // [L] weight of each token's log-probability
}

// Tokens returns the number of tokens with a non-zero weight.
func (s Seq) Tokens() int {
	n := 0
	for _, w := range s.W {
		if w != 0 {
			n++
		}
	}
	return n
}

// check panics when s is malformed: a programmer's mistake.
func (s Seq) check() {
	if len(s.IDs) < 2 || len(s.W) != len(s.IDs) || s.W[0] != 0 {
		panic(fmt.Sprintf("rl: sequence of %d tokens with %d weights (W[0] must be 0, at least 2 tokens)", len(s.IDs), len(s.W)))
	}
}

// packed is several sequences packed into one batch, and where each starts.
type packed struct {
	bt  llama.Batch
	off []int // start of each sequence in the batch
}

// pack packs seqs into one batch (llama.Batch.Append): the target of
// position off+i is IDs[i+1] where W[i+1] ≠ 0 and −1 (no log-probability)
// elsewhere.
func pack(seqs []Seq) packed { return packAll(seqs, nil) }

// packAll is pack, except that every token after the first of the
// sequences k with all[k] set gets its target (a log-probability), weighed
// or not: the NLL term over a whole sequence needs them all.
func packAll(seqs []Seq, all []bool) packed {
	var p packed
	for k, s := range seqs {
		s.check()
		p.off = append(p.off, len(p.bt.IDs))
		whole := k < len(all) && all[k]
		p.bt.Append(s.IDs, func(i int) bool { return s.W[i] != 0 || (whole && i > 0) })
	}
	return p
}

// score returns sequence k's score from the batch's log-probabilities
// logp [N].
func (p packed) score(seqs []Seq, k int, logp []float32) float64 {
	return weightedSum(seqs[k], logp[p.off[k]:])
}

// weightedSum returns Σ_{i≥1} W[i]·logp[i−1]: s's score from the
// log-probabilities of its positions (logp starts at s's first position).
func weightedSum(s Seq, logp []float32) float64 {
	var sum float64
	for i := 1; i < len(s.IDs); i++ {
		if w := s.W[i]; w != 0 {
			sum += float64(w) * float64(logp[i-1])
		}
	}
	return sum
}

// addGrad adds g·W of sequence k to dlogp [N], the gradient of g·score.
func (p packed) addGrad(seqs []Seq, k int, g float64, dlogp []float32) {
	o := p.off[k]
	for i := 1; i < len(seqs[k].IDs); i++ {
		if w := seqs[k].W[i]; w != 0 {
			dlogp[o+i-1] += float32(g * float64(w))
		}
	}
}

// batches splits seqs into consecutive groups of about maxTokens tokens
// (at least one sequence each) and returns each group's bounds.
func batches(seqs []Seq, maxTokens int) [][2]int {
	return splitTokens(len(seqs), func(i int) int { return len(seqs[i].IDs) }, maxTokens)
}

// splitTokens splits items 0…n−1, item i being tokens(i) tokens long, into
// consecutive groups of about maxTokens tokens (at least one item each)
// and returns each group's bounds.
func splitTokens(n int, tokens func(i int) int, maxTokens int) [][2]int {
	var out [][2]int
	lo, sum := 0, 0
	for i := range n {
		if i > lo && sum+tokens(i) > maxTokens {
			out = append(out, [2]int{lo, i})
			lo, sum = i, 0
		}
		sum += tokens(i)
	}
	if lo < n {
		out = append(out, [2]int{lo, n})
	}
	return out
}

// Scores returns the score of each sequence under model m with adapter ad
// (nil: the base), forward only, packing about batchTokens tokens per pass.
func Scores(m *llama.Model, ad *llama.Adapter, seqs []Seq, batchTokens int) ([]float64, error) {
	lps, err := tokenLogps(m, ad, seqs, batchTokens)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(seqs))
	for k, s := range seqs {
		out[k] = weightedSum(s, lps[k][1:])
	}
	return out, nil
}

// tokenLogps returns, for each sequence, the log-probability of each of its
// tokens under m with adapter ad (index i: token i, 0 for the first), forward
// only, packing about batchTokens tokens per pass.
func tokenLogps(m *llama.Model, ad *llama.Adapter, seqs []Seq, batchTokens int) ([][]float32, error) {
	out := make([][]float32, len(seqs))
	for _, r := range batches(seqs, batchTokens) {
		group := seqs[r[0]:r[1]]
		p := pack(group)
		pass, err := m.ForwardTrain(p.bt, ad)
		if err != nil {
			return nil, err
		}
		logp := engine.ToF32(m.Backend(), pass.LogP)
		pass.Release()
		for k, s := range group {
			lp := make([]float32, len(s.IDs))
			copy(lp[1:], logp[p.off[k]:p.off[k]+len(s.IDs)-1])
			out[r[0]+k] = lp
		}
	}
	return out, nil
}
