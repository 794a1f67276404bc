package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Setting is one setting of a method's knobs that the demo validates.
type Setting struct {
	LR     float64 `json:"lr"`
	Beta   float64 `json:"beta,omitempty"`  // β of a preference loss (0: none)
	Epochs int     `json:"epochs"`          // passes over the training data
	Share  float64 `json:"share,omitempty"` // fraction of the pairs trained on (0: not a knob)
	// Kept is the epoch whose weights a policy kept, validated after each
	// of its epochs (Config.EpochSelect), Epochs being the most it
	// trained; 0: the last, not chosen among several.
	Kept int `json:"epoch_kept,omitempty"`
}

// String writes s as "lr 1e-04, β 0.1, 2 epochs, 60% of the pairs", with
// the epoch kept when there is one: "lr 3e-04, β 0.03, 3 epochs (epoch 2
// kept), 100% of the pairs".
func (s Setting) String() string {
	parts := []string{fmt.Sprintf("lr %.0e", s.LR)}
	if s.Beta != 0 {
		parts = append(parts, fmt.Sprintf("β %g", s.Beta))
	}
	if s.Epochs == 1 {
		parts = append(parts, "1 epoch")
	} else {
		parts = append(parts, fmt.Sprintf("%d epochs", s.Epochs))
	}
	if s.Kept != 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (epoch %d kept)", s.Kept)
	}
	if s.Share != 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% of the pairs", 100*s.Share))
	}
	return strings.Join(parts, ", ")
}

// Space is what a method's knobs may be set to: each knob takes one of
// its values (a knob without values is not drawn; it keeps the default's).
type Space struct {
	LRs    []float64
	Betas  []float64
	Epochs []int
	Shares []float64
}

// Spaces are the demo's tuning spaces, by method kind: "rft" (rejection
// fine-tuning: learning rate and passes over the successful rollouts),
// "pref" (every DPO-trained policy: multi-turn DPO and each SWEET-RL actor,
// with the learning rate, β, epochs 1–3 and the share of the pairs
// 0.3–1.0) and "critic" (learning rate, β and epochs 1–4).
func Spaces() map[string]Space {
	return map[string]Space{
		"rft":    {LRs: []float64{1e-4, 3e-4, 5e-4, 1e-3}, Epochs: []int{1, 2, 3}},
		"pref":   {LRs: []float64{3e-5, 1e-4, 3e-4}, Betas: []float64{0.03, 0.1, 0.3}, Epochs: []int{1, 2, 3}, Shares: []float64{0.3, 0.6, 1}},
		"critic": {LRs: []float64{3e-5, 1e-4, 3e-4}, Betas: []float64{0.03, 0.1, 0.3}, Epochs: []int{1, 2, 3, 4}},
	}
}

// Settings returns k settings of the space named kind: def first, then
// settings drawn uniformly from the space, each knob apart, without a
// repeat. The draws depend on kind alone (not on the run's seed), so that
// every run, and every method of one kind, validates the same settings.
// Fewer than k are returned when the space holds fewer.
func Settings(kind string, def Setting, k int) []Setting {
	sp, ok := Spaces()[kind]
	if !ok {
		panic("pipeline: no tuning space " + kind)
	}
	out := []Setting{def}
	var h uint64 = 1469598103934665603
	for _, c := range []byte(kind) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	rng := rand.New(rand.NewPCG(h, 0x74756e65))
	for tries := 0; len(out) < k && tries < 1000; tries++ {
		s := def
		if len(sp.LRs) > 0 {
			s.LR = sp.LRs[rng.IntN(len(sp.LRs))]
		}
		if len(sp.Betas) > 0 {
			s.Beta = sp.Betas[rng.IntN(len(sp.Betas))]
		}
		if len(sp.Epochs) > 0 {
			s.Epochs = sp.Epochs[rng.IntN(len(sp.Epochs))]
		}
		if len(sp.Shares) > 0 {
			s.Share = sp.Shares[rng.IntN(len(sp.Shares))]
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
