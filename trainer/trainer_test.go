package trainer

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/metrics/tfevents"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/tokenizer"
)

var corpus = []string{
	"the cat sat on the mat.", "a dog ran in the park.", "the sun is warm today.",
	"birds sing in the morning.", "we like to read books.", "the sea is blue and deep.",
}

func setup(t *testing.T, lora bool) (*llama.Model, *llama.Adapter, *data.Packer) {
	t.Helper()
	c := llama.Config{Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 64, Vocab: 258,
		NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 64, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 2}), c, engine.F32, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var ad *llama.Adapter
	if lora {
		if ad, err = m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 2); err != nil {
			t.Fatal(err)
		}
	}
	var ex []data.Example
	for _, doc := range corpus {
		ids, loss := data.TokenizeText(tokenizer.Bytes{}, doc, true)
		ex = append(ex, data.Example{IDs: ids, Loss: loss})
	}
	p, err := data.NewPacker(ex, data.PackOptions{TokensPerBatch: 64, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m, ad, p
}

func config(dir string, steps int) Config {
	return Config{Steps: steps, MicroBatches: 2, CheckpointEvery: 2, KeepCheckpoints: 2, RunDir: dir,
		Schedule: optim.Schedule{Peak: 3e-3, Warmup: 2, Total: 8, Cosine: true, MinRatio: 0.1},
		AdamW:    optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}}
}

func weights(m *llama.Model, ad *llama.Adapter) map[string][]float32 {
	out := map[string][]float32{}
	visit := func(name string, t *engine.Tensor) { out[name] = engine.ToF32(m.Backend(), t) }
	m.Weights.Each(visit)
	if ad != nil {
		ad.Each(visit)
	}
	return out
}

// TestResumeIsBitExact trains 8 steps in one go, and 5 steps then a fresh
// process-like restart (new model, new trainer) that resumes from the
// checkpoint to step 8: the final weights and the losses of the steps after
// the resume must be identical.
func TestResumeIsBitExact(t *testing.T) {
	for _, lora := range []bool{false, true} {
		m, ad, p := setup(t, lora)
		var log bytes.Buffer
		tr, err := New(m, ad, p, nil, config(t.TempDir(), 8), &log)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(); err != nil {
			t.Fatal(err)
		}
		want := weights(m, ad)

		dir := t.TempDir()
		m1, ad1, p1 := setup(t, lora)
		tr1, _ := New(m1, ad1, p1, nil, config(dir, 5), &log)
		if err := tr1.Run(); err != nil {
			t.Fatal(err)
		}
		m2, ad2, p2 := setup(t, lora)
		tr2, _ := New(m2, ad2, p2, nil, config(dir, 8), &log)
		step, err := tr2.Resume()
		if err != nil || step != 5 {
			t.Fatalf("resumed at step %d, %v; want 5", step, err)
		}
		if err := tr2.Run(); err != nil {
			t.Fatal(err)
		}
		got := weights(m2, ad2)
		for name, w := range want {
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(got[name][i]) {
					t.Fatalf("lora=%v: %s[%d] = %v after resuming, %v uninterrupted", lora, name, i, got[name][i], w[i])
				}
			}
		}
		recs, err := metrics.Read(dir + "/metrics.jsonl")
		if err != nil || len(recs) != 8 {
			t.Fatalf("metrics: %d records, %v", len(recs), err)
		}
	}
}

// TestResumeTruncatesMetrics kills a run (as far as the files show) after
// step 5, whose checkpoint never made it to disk, with its metrics line
// half written: the resumed run continues from step 4 and records each
// step once.
func TestResumeTruncatesMetrics(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	m1, ad1, p1 := setup(t, true)
	tr1, _ := New(m1, ad1, p1, nil, config(dir, 5), &log)
	if err := tr1.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "step-000005")); err != nil {
		t.Fatal(err)
	}
	mf, err := os.OpenFile(filepath.Join(dir, MetricsName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	mf.WriteString(`{"step":6,"lo`)
	mf.Close()

	m2, ad2, p2 := setup(t, true)
	log.Reset()
	tr2, _ := New(m2, ad2, p2, nil, config(dir, 8), &log)
	step, err := tr2.Resume()
	if err != nil || step != 4 {
		t.Fatalf("resumed at step %d, %v; want 4", step, err)
	}
	if !strings.Contains(log.String(), "dropped 2 records after step 4") {
		t.Errorf("Resume did not say what it dropped:\n%s", log.String())
	}
	if err := tr2.Run(); err != nil {
		t.Fatal(err)
	}
	recs, err := metrics.Read(filepath.Join(dir, MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(steps, want) {
		t.Errorf("metrics steps %v, want %v", steps, want)
	}

	// TensorBoard, reading both runs' event files, shows each step once,
	// with the loss metrics.jsonl holds.
	series, err := tfevents.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	loss := series[metrics.Loss]
	if len(loss) != len(recs) {
		t.Fatalf("the event files hold %d losses after the resume, want %d: %v", len(loss), len(recs), loss)
	}
	for i, p := range loss {
		if v, _ := recs[i].Get(metrics.Loss); p.Step != recs[i].Step || p.Value != float32(v) {
			t.Errorf("event %d: step %d loss %v; metrics.jsonl has step %d loss %v", i, p.Step, p.Value, recs[i].Step, v)
		}
	}
}

// TestRunDirNotWritable checks that a run directory that cannot be
// written is refused before training, naming it.
func TestRunDirNotWritable(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(file, "run")} // its parent is a file
	if os.Geteuid() != 0 {                       // root writes through a read-only mode
		ro := filepath.Join(base, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, ro)
	} else {
		t.Log("running as root: the read-only directory case is not checked")
	}
	for _, dir := range dirs {
		m, ad, p := setup(t, true)
		var log bytes.Buffer
		_, err := New(m, ad, p, nil, config(dir, 2), &log)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not") {
			t.Errorf("New with run directory %s: %v, want an error naming it", dir, err)
		}
	}
}

// TestLossFalls memorises the corpus: the loss must fall well below its
// starting value, and evaluation reports a finite held-out loss.
func TestLossFalls(t *testing.T) {
	m, _, p := setup(t, false)
	_, _, ev := setup(t, false)
	var log bytes.Buffer
	cfg := config("", 40)
	cfg.Schedule = optim.Schedule{Peak: 1e-2, Warmup: 3}
	cfg.EvalEvery, cfg.EvalBatches = 20, 2
	tr, err := New(m, nil, p, ev, cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	first, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(); err != nil {
		t.Fatal(err)
	}
	last, _ := tr.Evaluate()
	if !(last < 0.6*first) {
		t.Errorf("loss %.3f → %.3f after 40 steps; want it to fall by 40%%", first, last)
	}
	if !strings.Contains(log.String(), "40/40") {
		t.Errorf("progress output lacks the final step:\n%s", log.String())
	}
}

// TestDivergedRunStops checks that a run whose loss stays non-finite stops
// with ErrDiverged naming the step, and that no checkpoint or final model
// is written from non-finite weights.
func TestDivergedRunStops(t *testing.T) {
	tests := []struct {
		name   string
		lr     float64
		poison bool   // a NaN in a trained weight before the run
		want   string // in the error
	}{
		{"huge learning rate", 1e9, false, "the loss was NaN for 3 steps in a row"},
		{"NaN weight", 3e-3, true, "training diverged at step 2: the trained weights hold non-finite values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _, p := setup(t, false)
			if tc.poison {
				w := m.Weights.Layers[0].Wq
				v := engine.ToF32(m.Backend(), w)
				v[5] = float32(math.NaN())
				engine.SetF32(m.Backend(), w, v)
			}
			dir := t.TempDir()
			cfg := config(dir, 20)
			cfg.MicroBatches, cfg.CheckpointEvery, cfg.Schedule.Peak, cfg.Schedule.Warmup = 1, 2, tc.lr, 0
			tr, err := New(m, nil, p, nil, cfg, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			err = tr.Run()
			if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), tc.want) || tr.Step() >= 20 {
				t.Fatalf("Run: %v after %d steps; want ErrDiverged saying %q before step 20", err, tr.Step(), tc.want)
			}
			if err := tr.SaveOutput(filepath.Join(dir, FinalDir)); tc.poison && !errors.Is(err, ErrDiverged) {
				t.Errorf("SaveOutput of NaN weights: %v, want ErrDiverged", err)
			}
			if _, err := os.Stat(filepath.Join(dir, FinalDir)); tc.poison && err == nil {
				t.Errorf("a final model was written from NaN weights")
			}
			// The newest checkpoint, if any, resumes into finite weights.
			m2, _, p2 := setup(t, false)
			tr2, err := New(m2, nil, p2, nil, config(dir, 20), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr2.Resume(); err != nil {
				t.Fatal(err)
			}
			for name, v := range weights(m2, nil) {
				for _, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("checkpoint at step %d holds a non-finite %s", tr2.Step(), name)
					}
				}
			}
		})
	}
}

// cancelAfter is a context that reports itself cancelled from its n-th
// call of Err on: RunContext asks once per step, so it stops a run after
// exactly n steps.
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

// TestInterruptAndResume cancels a run's context during step 3 (a step
// that is no checkpoint's): the run finishes the step, writes a
// checkpoint of it and returns ErrInterrupted naming it, and a resumed run
// ends with the weights and losses of an uninterrupted one, bit for bit.
func TestInterruptAndResume(t *testing.T) {
	for _, c := range []struct {
		lora    bool
		dropout float32 // the adapter's
	}{{false, 0}, {true, 0}, {true, 0.25}} {
		lora := c.lora
		setup := func(t *testing.T, lora bool) (*llama.Model, *llama.Adapter, *data.Packer) {
			m, ad, p := setup(t, lora)
			if ad != nil {
				ad.Config.Dropout = c.dropout
			}
			return m, ad, p
		}
		m, ad, p := setup(t, lora)
		whole := t.TempDir()
		tr, _ := New(m, ad, p, nil, config(whole, 8), &bytes.Buffer{})
		if err := tr.Run(); err != nil {
			t.Fatal(err)
		}
		want := weights(m, ad)

		dir := t.TempDir()
		m1, ad1, p1 := setup(t, lora)
		tr1, _ := New(m1, ad1, p1, nil, config(dir, 8), &bytes.Buffer{})
		err := tr1.RunContext(&cancelAfter{Context: context.Background(), n: 3})
		if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "after step 3: checkpoint "+filepath.Join(dir, "step-000003")) {
			t.Fatalf("lora=%v: a run cancelled during step 3 returned %v; want ErrInterrupted naming step-000003", lora, err)
		}
		m2, ad2, p2 := setup(t, lora)
		tr2, _ := New(m2, ad2, p2, nil, config(dir, 8), &bytes.Buffer{})
		if step, err := tr2.Resume(); err != nil || step != 3 {
			t.Fatalf("lora=%v: resumed at step %d, %v; want 3", lora, step, err)
		}
		if err := tr2.Run(); err != nil {
			t.Fatal(err)
		}
		got := weights(m2, ad2)
		for name, w := range want {
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(got[name][i]) {
					t.Fatalf("lora=%v: %s[%d] = %v after the interrupted run resumed, %v uninterrupted", lora, name, i, got[name][i], w[i])
				}
			}
		}
		a, errA := metrics.Read(filepath.Join(whole, MetricsName))
		b, errB := metrics.Read(filepath.Join(dir, MetricsName))
		if errA != nil || errB != nil || len(a) != 8 || len(b) != 8 {
			t.Fatalf("metrics: %d and %d records (%v, %v), want 8", len(a), len(b), errA, errB)
		}
		for i := range a {
			la, _ := a[i].Get(metrics.Loss)
			lb, _ := b[i].Get(metrics.Loss)
			if la != lb {
				t.Errorf("lora=%v: step %d loss %v uninterrupted, %v interrupted and resumed", lora, a[i].Step, la, lb)
			}
		}
	}
}
