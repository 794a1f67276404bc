package rl

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/metrics/tfevents"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// perfKeys are the values every trainer records per step.
var perfKeys = []string{metrics.TokensPerS, metrics.WallS, metrics.PoolPeakBytes, metrics.PoolHighWater, metrics.GoHeapBytes, metrics.GoSysBytes, metrics.MFU}

// TestStageMetrics runs each RL stage's trainer with a metrics directory
// and checks that metrics.jsonl holds a record per step with the stage's
// keys, that a fresh adapter's first step starts at the reference (log
// 2 loss, zero log-ratios and KL), and that the TensorBoard event file
// holds the same values.
func TestStageMetrics(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pairs := []PrefPair{
		{Chosen: randSeq(r, 10, func(int) float32 { return 1 }), Rejected: randSeq(r, 9, func(int) float32 { return 1 })},
		{Chosen: randSeq(r, 8, func(int) float32 { return 1 }), Rejected: randSeq(r, 11, func(int) float32 { return 1 })},
	}
	opts := PrefOptions{Beta: 0.5, Epochs: 3, PairsPerStep: 2, BatchTokens: 20, LR: 1e-2, MinLRRatio: 0.1,
		AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, PeakFLOPS: 1e9}
	prefKeys := []string{metrics.Loss, metrics.LR, PairAcc, Margin, ChosenLogRatio, RejectedLogRatio, KL}
	var prefSt PrefStats // the last preference run's
	tests := []struct {
		name  string
		steps int
		keys  []string
		run   func(m *llama.Model, ad *llama.Adapter, dir string) error
	}{
		{"critic and mtdpo", 3, prefKeys, func(m *llama.Model, ad *llama.Adapter, dir string) error {
			o := opts
			o.MetricsDir = dir
			var err error
			prefSt, err = TrainPreferences(m, ad, pairs, o)
			return err
		}},
		{"actor", 3, prefKeys, func(m *llama.Model, ad *llama.Adapter, dir string) error {
			o := opts
			o.MetricsDir, o.NLLCoef = dir, 0.01
			var err error
			prefSt, err = TrainPreferences(m, ad, pairs, o)
			return err
		}},
		{"value critic", 3, []string{metrics.Loss, metrics.LR, PairAcc, Margin}, func(m *llama.Model, ad *llama.Adapter, dir string) error {
			v, err := NewValueHead(m)
			if err != nil {
				return err
			}
			o := opts
			o.MetricsDir = dir
			_, err = TrainValueCritic(m, ad, v, pairs, o)
			return err
		}},
		{"rft", 4, []string{metrics.Loss, metrics.LR, metrics.GradNorm}, func(m *llama.Model, ad *llama.Adapter, dir string) error {
			var ex []data.Example
			for _, p := range pairs {
				loss := make([]bool, len(p.Chosen.IDs))
				for i := range loss {
					loss[i] = i > 0
				}
				ex = append(ex, data.Example{IDs: p.Chosen.IDs, Loss: loss})
			}
			return SupervisedFT(m, ad, ex, SFTOptions{Steps: 4, BatchTokens: 32, MaxLen: 32, LR: 1e-2, Seed: 1, MetricsDir: dir, PeakFLOPS: 1e9}, nil)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Twice: a stage run again into the same directory replaces
			// the earlier run's records, in both files.
			var m *llama.Model
			var ad *llama.Adapter
			for range 2 {
				m = newModel(t, 0.3)
				var err error
				if ad, err = m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 9); err != nil {
					t.Fatal(err)
				}
				if err := tc.run(m, ad, dir); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := metrics.Read(filepath.Join(dir, trainer.MetricsName))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tc.steps {
				t.Fatalf("%d records, want %d", len(recs), tc.steps)
			}
			events, err := tfevents.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				if rec.Step != int64(i+1) {
					t.Errorf("record %d has step %d", i, rec.Step)
				}
				for _, k := range append(tc.keys, perfKeys...) {
					v, ok := rec.Get(k)
					if !ok || math.IsNaN(v) {
						t.Errorf("step %d: %q is %v (present %v)", rec.Step, k, v, ok)
						continue
					}
					ps := events[k]
					if len(ps) != len(recs) || ps[i].Step != rec.Step || float32(v) != ps[i].Value {
						t.Errorf("step %d: %q is %v in the metrics file, the event file has %v", rec.Step, k, v, ps)
					}
				}
			}
			first := recs[0]
			if c, ok := first.Get(ChosenLogRatio); ok {
				rr, _ := first.Get(RejectedLogRatio)
				kl, _ := first.Get(KL)
				if math.Abs(c) > 1e-5 || math.Abs(rr) > 1e-5 || math.Abs(kl) > 1e-9 {
					t.Errorf("first step: log-ratios %g, %g and KL %g; a fresh adapter is the reference", c, rr, kl)
				}
			}
			if _, ok := first.Get(PairAcc); ok && tc.name != "actor" {
				if l, _ := first.Get(metrics.Loss); math.Abs(l-math.Log(2)) > 1e-3 {
					t.Errorf("first step's loss %g, want log 2", l)
				}
			}
			last := recs[len(recs)-1]
			if c, ok := last.Get(ChosenLogRatio); ok {
				rr, _ := last.Get(RejectedLogRatio)
				mg, _ := last.Get(Margin)
				kl, _ := last.Get(KL)
				if math.Abs(mg-(c-rr)) > 1e-9 || !(kl > 0) {
					t.Errorf("last step: margin %g, chosen %g − rejected %g; KL %g (want > 0 after training)", mg, c, rr, kl)
				}
				// One step an epoch: the last epoch's means are its record's.
				if math.Abs(prefSt.LastChosen-c) > 1e-12 || math.Abs(prefSt.LastRejected-rr) > 1e-12 || c == 0 {
					t.Errorf("the run's last-epoch log-ratios %g, %g; its last step recorded %g, %g", prefSt.LastChosen, prefSt.LastRejected, c, rr)
				}
			}
			fpt := trainer.FLOPsPerToken(m, ad)
			if tc.name == "value critic" { // the classifier runs forward only
				fpt -= 2 * float64(m.Config.Vocab) * float64(m.Config.Dim)
			}
			tps, _ := last.Get(metrics.TokensPerS)
			if mfu, _ := last.Get(metrics.MFU); math.Abs(mfu-tps*fpt/1e9) > 1e-9*mfu {
				t.Errorf("MFU %g, want tokens/s %g × %g FLOPs / 1e9", mfu, tps, fpt)
			}
		})
	}
}
