package rl

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// TestStageResume stops each RL stage's trainer after step k — its run
// directory then holds the checkpoints up to step k, a damaged one of step
// k+1 (a kill while it was being written) and the metrics of every step —
// and resumes it in a fresh process (a new model and adapter): the
// per-step losses and the trained weights must be those of the
// uninterrupted run bit for bit, the metrics of steps up to k must be kept
// as they were (a marker written into them survives, so they were not
// recomputed), and those after k written once.
func TestStageResume(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var pairs []PrefPair
	for i := range 5 {
		pairs = append(pairs, PrefPair{Chosen: randSeq(r, 8+i, func(int) float32 { return 1 }), Rejected: randSeq(r, 11-i, func(int) float32 { return 1 })})
	}
	opts := PrefOptions{Beta: 0.5, Epochs: 2, PairsPerStep: 2, BatchTokens: 20, LR: 1e-2, WarmupFrac: 0.2, MinLRRatio: 0.1,
		AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, MaxGradNorm: 1}, Seed: 3}
	var ex []data.Example
	for _, p := range pairs {
		loss := make([]bool, len(p.Chosen.IDs))
		for i := range loss {
			loss[i] = i > 0
		}
		ex = append(ex, data.Example{IDs: p.Chosen.IDs, Loss: loss})
	}
	// Each stage trains m's adapter ad with checkpoints in dir and returns
	// its per-step losses (nil where the stage reports none) and what it
	// trained beside the adapter.
	tests := []struct {
		name  string
		steps int
		run   func(m *llama.Model, ad *llama.Adapter, ck Checkpoints) ([]float64, map[string]*engine.Tensor, error)
	}{
		{"critic, log-probability head", 6, func(m *llama.Model, ad *llama.Adapter, ck Checkpoints) ([]float64, map[string]*engine.Tensor, error) {
			o := opts
			o.MetricsDir, o.Checkpoints = ck.RunDir, ck
			st, err := TrainPreferences(m, ad, pairs, o)
			return st.Losses, nil, err
		}},
		{"actor and mtdpo, NLL term", 6, func(m *llama.Model, ad *llama.Adapter, ck Checkpoints) ([]float64, map[string]*engine.Tensor, error) {
			o := opts
			o.MetricsDir, o.Checkpoints, o.NLLCoef, o.NLLSequence = ck.RunDir, ck, 0.01, true
			st, err := TrainPreferences(m, ad, pairs, o)
			return st.Losses, nil, err
		}},
		{"critic, value head", 6, func(m *llama.Model, ad *llama.Adapter, ck Checkpoints) ([]float64, map[string]*engine.Tensor, error) {
			v, err := NewValueHead(m)
			if err != nil {
				return nil, nil, err
			}
			o := opts
			o.MetricsDir, o.Checkpoints = ck.RunDir, ck
			st, err := TrainValueCritic(m, ad, v, pairs, o)
			return st.Losses, map[string]*engine.Tensor{"value_head.weight": v.W, "value_head.bias": v.B}, err
		}},
		{"rft", 5, func(m *llama.Model, ad *llama.Adapter, ck Checkpoints) ([]float64, map[string]*engine.Tensor, error) {
			err := SupervisedFT(m, ad, ex, SFTOptions{Steps: 5, BatchTokens: 32, MaxLen: 32, LR: 1e-2, Seed: 1, Checkpoints: ck}, nil)
			return nil, nil, err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// run trains a fresh model and adapter in dir and returns the
			// losses and every trained tensor's values.
			run := func(dir string) ([]float64, map[string][]float32) {
				m := newModel(t, 0.3)
				ad := newAdapter(t, m)
				losses, extra, err := tc.run(m, ad, Checkpoints{RunDir: dir, Every: 1, Keep: 100})
				if err != nil {
					t.Fatal(err)
				}
				w := map[string][]float32{}
				ad.Each(func(n string, x *engine.Tensor) { w[n] = engine.ToF32(m.Backend(), x) })
				for n, x := range extra {
					w[n] = engine.ToF32(m.Backend(), x)
				}
				return losses, w
			}
			whole := t.TempDir()
			wantLoss, wantW := run(whole)
			wantRecs := readLosses(t, whole)
			if len(wantRecs) != tc.steps || (wantLoss != nil && !slices.Equal(wantLoss, wantRecs)) {
				t.Fatalf("the uninterrupted run recorded %v and returned %v; want %d steps alike", wantRecs, wantLoss, tc.steps)
			}
			for _, k := range []int{2, 3, 4} {
				dir := t.TempDir()
				stopAfter(t, whole, dir, k)
				gotLoss, gotW := run(dir)
				if wantLoss != nil && !slices.Equal(gotLoss, wantLoss) {
					t.Errorf("stopped after step %d: losses %v after resuming, %v uninterrupted", k, gotLoss, wantLoss)
				}
				recs := readLosses(t, dir)
				for i, l := range recs {
					want := wantRecs[i]
					if i < k {
						want = marker(i + 1)
					}
					if i >= len(wantRecs) || l != want {
						t.Errorf("stopped after step %d: metrics.jsonl step %d records loss %v, want %v", k, i+1, l, want)
					}
				}
				if len(recs) != tc.steps {
					t.Errorf("stopped after step %d: metrics.jsonl holds %d steps, want %d", k, len(recs), tc.steps)
				}
				for n, w := range wantW {
					if !slices.Equal(gotW[n], w) {
						t.Errorf("stopped after step %d: %s differs from the uninterrupted run's", k, n)
					}
				}
			}
		})
	}
}

// marker is the loss stopAfter writes into step's metrics record.
func marker(step int) float64 { return 1000 + float64(step) }

// stopAfter makes dst the run directory a run stopped after step k leaves,
// from src, the directory of the whole run (checkpoints of every step):
// the checkpoints up to step k, step k+1's damaged, and every step's
// metrics, those up to k with marker losses.
func stopAfter(t *testing.T, src, dst string, k int) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		step, ok := checkpoint.Step(e.Name())
		if !e.IsDir() || !ok || step > k+1 {
			continue
		}
		if err := os.CopyFS(filepath.Join(dst, e.Name()), os.DirFS(filepath.Join(src, e.Name()))); err != nil {
			t.Fatal(err)
		}
		if step == k+1 {
			f := filepath.Join(dst, e.Name(), checkpoint.TrainerName)
			if err := os.WriteFile(f, []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs, err := metrics.Read(filepath.Join(src, trainer.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := metrics.NewWriter(&b, "metrics", metrics.WriterOptions{})
	for _, rec := range recs {
		if rec.Step <= int64(k) {
			rec.Values[metrics.Loss] = marker(int(rec.Step))
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, trainer.MetricsName), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readLosses returns the losses metrics.jsonl in dir records, by step.
func readLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	recs, err := metrics.Read(filepath.Join(dir, trainer.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i, rec := range recs {
		l, ok := rec.Get(metrics.Loss)
		if rec.Step != int64(i+1) || !ok {
			t.Fatalf("%s: record %d is of step %d, loss %v (present %v)", dir, i+1, rec.Step, l, ok)
		}
		out = append(out, l)
	}
	return out
}

// TestExactFloat: the values a preference checkpoint records survive JSON
// bit for bit, the non-finite ones included.
func TestExactFloat(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 0.1, 1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()} {
		b, err := exactFloat(v).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var got exactFloat
		if err := got.UnmarshalJSON(b); err != nil {
			t.Fatalf("%v: %s: %v", v, b, err)
		}
		if math.Float64bits(float64(got)) != math.Float64bits(v) && !(math.IsNaN(v) && math.IsNaN(float64(got))) {
			t.Errorf("%v became %v through %s", v, float64(got), b)
		}
	}
	var f exactFloat
	if err := f.UnmarshalJSON([]byte("0.5")); err == nil || !strings.Contains(err.Error(), "quoted") {
		t.Errorf("an unquoted number: %v, want an error asking for a quoted one", err)
	}
}

// TestPairsFile: the actor's pairs survive SavePairs and LoadPairs, and a
// damaged file is an error naming its line.
func TestPairsFile(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	pairs := []PrefPair{
		{Chosen: randSeq(r, 5, func(i int) float32 { return float32(i) / 3 }), Rejected: randSeq(r, 7, func(int) float32 { return 1 })},
		{Chosen: randSeq(r, 4, func(int) float32 { return 0.1 }), Rejected: randSeq(r, 3, func(int) float32 { return 1 })},
	}
	path := filepath.Join(t.TempDir(), PairsFile)
	if err := SavePairs(path, pairs); err != nil {
		t.Fatal(err)
	}
	got, err := LoadPairs(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pairs) {
		t.Fatalf("%d pairs read back, want %d", len(got), len(pairs))
	}
	for i, p := range pairs {
		for _, s := range [][2]Seq{{got[i].Chosen, p.Chosen}, {got[i].Rejected, p.Rejected}} {
			if !slices.Equal(s[0].IDs, s[1].IDs) || !slices.Equal(s[0].W, s[1].W) {
				t.Errorf("pair %d: %+v read back as %+v", i, s[1], s[0])
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append(b, []byte(`{"chosen":{"ids":[1,2],"w":[0]},"rejected":{"ids":[1],"w":[0]}}`+"\n")...)
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPairs(path); err == nil || !strings.Contains(err.Error(), PairsFile+":3:") {
		t.Errorf("a sequence of 2 tokens and 1 weight: %v, want an error naming line 3", err)
	}
}

// TestPreferenceStopAndResume stops a preference run for real — its
// AfterEpoch fails after the first of three epochs, as an interrupted run
// would stop — and resumes it in a fresh process: the resumed run's
// per-step losses and adapter are the uninterrupted run's, bit for bit.
func TestPreferenceStopAndResume(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	var pairs []PrefPair
	for i := range 3 {
		pairs = append(pairs, PrefPair{Chosen: randSeq(r, 6+i, func(int) float32 { return 1 }), Rejected: randSeq(r, 9-i, func(int) float32 { return 1 })})
	}
	o := PrefOptions{Beta: 0.5, Epochs: 3, PairsPerStep: 2, BatchTokens: 40, LR: 1e-2, WarmupFrac: 0.2, MinLRRatio: 0.1,
		AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, Seed: 5}
	run := func(dir string) (PrefStats, map[string][]float32, error) {
		m := newModel(t, 0.3)
		ad := newAdapter(t, m)
		oo := o
		oo.Checkpoints = Checkpoints{RunDir: dir, Every: 100, Keep: 1}
		st, err := TrainPreferences(m, ad, pairs, oo)
		w := map[string][]float32{}
		ad.Each(func(n string, x *engine.Tensor) { w[n] = engine.ToF32(m.Backend(), x) })
		return st, w, err
	}
	want, wantW, err := run(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stopAt := func(d string) {
		m := newModel(t, 0.3)
		ad := newAdapter(t, m)
		oo := o
		oo.Checkpoints = Checkpoints{RunDir: d, Every: 2, Keep: 1}
		oo.AfterEpoch = func(epoch int, _ PrefStats) error {
			if epoch == 1 {
				return errors.New("stopped")
			}
			return nil
		}
		if _, err := TrainPreferences(m, ad, pairs, oo); err == nil {
			t.Fatal("the stopped run did not stop")
		}
	}
	stopAt(dir)
	if d, _, err := checkpoint.Latest(dir); err != nil || filepath.Base(d) != "step-000002" {
		t.Fatalf("the run stopped after epoch 1 (2 steps) left %q (%v), want step-000002", d, err)
	}
	m := newModel(t, 0.3)
	ad := newAdapter(t, m)
	oo := o
	var log bytes.Buffer
	oo.Checkpoints, oo.Progress = Checkpoints{RunDir: dir, Every: 2, Keep: 1}, &log
	got, err := TrainPreferences(m, ad, pairs, oo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "step-000002: step 2, epoch 1, 3 of its 3 pairs done") {
		t.Errorf("the resumed run does not say it resumes from step 2:\n%s", log.String())
	}
	if !slices.Equal(got.Losses, want.Losses) || got.FirstLoss != want.FirstLoss || got.LastAcc != want.LastAcc || got.Steps != want.Steps {
		t.Errorf("resumed: %v (%d steps), uninterrupted %v (%d steps)", got.Losses, got.Steps, want.Losses, want.Steps)
	}
	ad.Each(func(n string, x *engine.Tensor) {
		if !slices.Equal(engine.ToF32(m.Backend(), x), wantW[n]) {
			t.Errorf("resumed: %s differs from the uninterrupted run's", n)
		}
	})
}

// cancelAfter is a context that reports itself cancelled from its n-th
// call of Err on: the trainer asks once per step.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// TestSupervisedFTInterrupt cancels rejection fine-tuning during step 2: it
// finishes the step, checkpoints it and returns trainer.ErrInterrupted, and
// the run resumed from there ends with the weights of an uninterrupted one.
func TestSupervisedFTInterrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	var ex []data.Example
	for i := range 5 {
		s := randSeq(r, 8+i, func(int) float32 { return 1 })
		loss := make([]bool, len(s.IDs))
		for i := range loss {
			loss[i] = i > 0
		}
		ex = append(ex, data.Example{IDs: s.IDs, Loss: loss})
	}
	run := func(ctx context.Context, dir string) (map[string][]float32, error) {
		m := newModel(t, 0.3)
		ad := newAdapter(t, m)
		err := SupervisedFTContext(ctx, m, ad, ex, SFTOptions{Steps: 5, BatchTokens: 32, MaxLen: 32, LR: 1e-2, Seed: 1,
			Checkpoints: Checkpoints{RunDir: dir, Every: 4, Keep: 3}}, nil)
		w := map[string][]float32{}
		ad.Each(func(n string, x *engine.Tensor) { w[n] = engine.ToF32(m.Backend(), x) })
		return w, err
	}
	want, err := run(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := run(&cancelAfter{Context: context.Background(), n: 2}, dir); !errors.Is(err, trainer.ErrInterrupted) || !strings.Contains(err.Error(), "step-000002") {
		t.Fatalf("cancelled during step 2: %v; want trainer.ErrInterrupted naming step-000002", err)
	}
	got, err := run(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want {
		if !slices.Equal(got[n], w) {
			t.Errorf("%s differs after the interrupted run resumed", n)
		}
	}
}
