package rl

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/trainer"
)

// TestSFTAfterStep checks SFTOptions.AfterStep: it is called after every
// step with the steps taken, sees that step's weights (those of the last
// call are the run's final ones, and a run without the hook ends on the
// same weights), and an error from it stops the run after that step.
func TestSFTAfterStep(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ex := sftExamples(r, 3)
	weights := func(m *llama.Model, ad *llama.Adapter) map[string][]float32 {
		w := map[string][]float32{}
		ad.Each(func(n string, x *engine.Tensor) { w[n] = engine.ToF32(m.Backend(), x) })
		return w
	}
	stop := errors.New("stop here")
	tests := []struct {
		name    string
		stopAt  int // the step whose hook fails (0: none)
		want    []int
		records int
	}{
		{"every step", 0, []int{1, 2, 3, 4, 5}, 5},
		{"stopped after step 2", 2, []int{1, 2}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t, 0.3)
			ad, err := m.NewAdapter(llama.LoRAEvery(2), 9)
			if err != nil {
				t.Fatal(err)
			}
			var steps []int
			var seen []map[string][]float32
			dir := t.TempDir()
			o := SFTOptions{Steps: 5, BatchTokens: 16, MaxLen: 16, LR: 1e-2, Seed: 1, MetricsDir: dir, AfterStep: func(step int) error {
				steps, seen = append(steps, step), append(seen, weights(m, ad))
				if step == tc.stopAt {
					return stop
				}
				return nil
			}}
			err = SupervisedFT(m, ad, ex, o, nil)
			if tc.stopAt == 0 && err != nil || tc.stopAt != 0 && !errors.Is(err, stop) {
				t.Fatalf("SupervisedFT: %v", err)
			}
			if !slices.Equal(steps, tc.want) {
				t.Fatalf("AfterStep called at steps %v, want %v", steps, tc.want)
			}
			if recs, err := metrics.Read(filepath.Join(dir, trainer.MetricsName)); err != nil || len(recs) != tc.records {
				t.Errorf("%d steps recorded (%v), want %d", len(recs), err, tc.records)
			}
			for i := 1; i < len(seen); i++ {
				if reflect.DeepEqual(seen[i], seen[i-1]) {
					t.Errorf("the weights at step %d are those of step %d: the hook did not see each step's", steps[i], steps[i-1])
				}
			}
			if tc.stopAt != 0 {
				return
			}
			if !reflect.DeepEqual(seen[len(seen)-1], weights(m, ad)) {
				t.Error("the last call's weights are not the run's final ones")
			}
			m2 := newModel(t, 0.3)
			ad2, err := m2.NewAdapter(llama.LoRAEvery(2), 9)
			if err != nil {
				t.Fatal(err)
			}
			o.AfterStep, o.MetricsDir = nil, ""
			if err := SupervisedFT(m2, ad2, ex, o, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(weights(m2, ad2), weights(m, ad)) {
				t.Error("a run without the hook ends on other weights")
			}
		})
	}
}
