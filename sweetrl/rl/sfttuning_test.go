package rl

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// TestSFTTuning checks that SupervisedFT follows SFTOptions.Tuning's
// schedule (train rft's --warmup and --min-lr-ratio) rather than the
// reference's, by the learning rate it records per step.
func TestSFTTuning(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ex := sftExamples(r, 3)
	const lr = 1e-2
	adamw := optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
	tests := []struct {
		name   string
		tuning *SFTTuning
		want   func(step int, got float64) bool
	}{
		// No warm-up and a floor of 1: the peak at every step.
		{"flat", &SFTTuning{WarmupFrac: 0, MinLRRatio: 1, AdamW: adamw}, func(_ int, got float64) bool { return got == lr }},
		// Half the steps warming up: below the peak at first.
		{"half warm-up", &SFTTuning{WarmupFrac: 0.5, MinLRRatio: 1, AdamW: adamw}, func(step int, got float64) bool { return step >= 2 && got == lr || step < 2 && got < lr }},
		// The reference's: cosine down to 0.1·lr, below the peak at the end.
		{"reference", nil, func(step int, got float64) bool { return step < 4 || got < lr }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t, 0.3)
			ad, err := m.NewAdapter(llama.LoRAEvery(2), 9)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := SupervisedFT(m, ad, ex, SFTOptions{Steps: 4, BatchTokens: 16, MaxLen: 16, LR: lr, Seed: 1, MetricsDir: dir, Tuning: tc.tuning}, nil); err != nil {
				t.Fatal(err)
			}
			recs, err := metrics.Read(filepath.Join(dir, trainer.MetricsName))
			if err != nil || len(recs) != 4 {
				t.Fatalf("%d records (%v), want 4", len(recs), err)
			}
			for _, rec := range recs {
				got, _ := rec.Get(metrics.LR)
				if !tc.want(int(rec.Step), got) {
					t.Errorf("step %d: lr %g", rec.Step, got)
				}
			}
		})
	}
}

// sftExamples returns n random examples of 10 tokens for SupervisedFT, every
// token after the first in the loss.
func sftExamples(r *rand.Rand, n int) []data.Example {
	var ex []data.Example
	for range n {
		s := randSeq(r, 10, func(int) float32 { return 1 })
		loss := make([]bool, len(s.IDs))
		for i := range loss {
			loss[i] = i > 0
		}
		ex = append(ex, data.Example{IDs: s.IDs, Loss: loss})
	}
	return ex
}
