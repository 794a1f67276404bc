package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/stats"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/trainer"
)

// TestSettings checks the equal tuning budget's settings: the default
// first, then distinct settings drawn from the method's space, the same
// for every run.
func TestSettings(t *testing.T) {
	def := Setting{LR: 1e-4, Beta: 0.1, Epochs: 1, Share: 1}
	got := Settings("pref", def, 6)
	if len(got) != 6 || got[0] != def {
		t.Fatalf("Settings = %v, want 6 beginning with the default", got)
	}
	sp := Spaces()["pref"]
	for i, s := range got[1:] {
		if !slices.Contains(sp.LRs, s.LR) || !slices.Contains(sp.Betas, s.Beta) || !slices.Contains(sp.Epochs, s.Epochs) || !slices.Contains(sp.Shares, s.Share) {
			t.Errorf("setting %d, %v, is outside the space %+v", i+1, s, sp)
		}
		if slices.Contains(got[:i+1], s) {
			t.Errorf("setting %d, %v, repeats", i+1, s)
		}
	}
	if again := Settings("pref", def, 6); !slices.Equal(again, got) {
		t.Errorf("a second call drew %v, the first %v", again, got)
	}
	if s := Spaces()["pref"]; slices.Min(s.Epochs) != 1 || slices.Max(s.Epochs) != 3 || slices.Min(s.Shares) != 0.3 || slices.Max(s.Shares) != 1 {
		t.Errorf("the DPO methods' space %+v: want epochs 1–3 and shares 0.3–1.0", s)
	}
	rft := Settings("rft", Setting{LR: 5e-4, Epochs: 2}, 4)
	for _, s := range rft {
		if s.Beta != 0 || s.Share != 0 {
			t.Errorf("rejection fine-tuning's setting %v has a β or a share", s)
		}
	}
	if s := (Setting{LR: 3e-4, Beta: 0.3, Epochs: 2, Share: 0.6}).String(); s != "lr 3e-04, β 0.3, 2 epochs, 60% of the pairs" {
		t.Errorf("String = %q", s)
	}
	if s := (Setting{LR: 3e-4, Beta: 0.03, Epochs: 3, Share: 1, Kept: 2}).String(); s != "lr 3e-04, β 0.03, 3 epochs (epoch 2 kept), 100% of the pairs" {
		t.Errorf("String = %q", s)
	}
}

// result is a one-seed result with rows of the given outcomes (2 tasks).
func result(seed uint64, rows map[string]string) *Result {
	res := &Result{Family: "tally", Seed: seed}
	for _, name := range []string{"SFT start", "multi-turn DPO", "SWEET-RL (paper's score)"} {
		o := rows[name]
		succ := float64(strings.Count(o, "1")) / float64(len(o))
		res.Rows = append(res.Rows, Row{Method: name, Outcomes: o, Summary: &rl.Summary{Tasks: 2, Episodes: len(o), Success: succ}})
	}
	return res
}

// TestCompare checks the paired comparisons on outcomes written by hand:
// the per-seed differences, the discordant episodes and McNemar's test
// over them, the bootstrap's mean over tasks, Holm's adjustment, and the
// study's mean ± sd.
func TestCompare(t *testing.T) {
	// Two tasks × two sampling seeds: episode s·2 + i is task i's at seed s.
	a := result(1, map[string]string{"SFT start": "0000", "multi-turn DPO": "1000", "SWEET-RL (paper's score)": "1101"})
	b := result(2, map[string]string{"SFT start": "0100", "multi-turn DPO": "0100", "SWEET-RL (paper's score)": "1111"})
	cmps := Compare([]*Result{a, b})
	if len(cmps) != 3 {
		t.Fatalf("%d comparisons, want SWEET-RL vs multi-turn DPO, vs SFT start, and multi-turn DPO vs SFT start (and nothing missing rows): %+v", len(cmps), cmps)
	}
	c := cmps[0]
	if c.A != "SWEET-RL (paper's score)" || c.B != "multi-turn DPO" {
		t.Fatalf("first comparison %s vs %s", c.A, c.B)
	}
	// Seed 1: SWEET-RL 3/4, DPO 1/4; seed 2: 4/4 against 1/4.
	if !slices.Equal(c.PerSeed, []float64{0.5, 0.75}) {
		t.Errorf("per seed %v, want [0.5 0.75]", c.PerSeed)
	}
	// Seed 1 episodes 1101 vs 1000: SWEET-RL alone in 2; seed 2 1111 vs 0100: 3.
	if c.OnlyA != 5 || c.OnlyB != 0 || c.McNemar != stats.McNemar(5, 0) {
		t.Errorf("discordant %d/%d, McNemar %v; want 5/0 and %v", c.OnlyA, c.OnlyB, c.McNemar, stats.McNemar(5, 0))
	}
	// Task differences (means over the two sampling seeds): seed 1 task 0
	// (1−1 + 0−0)/2 = 0, task 1 (1−0 + 1−0)/2 = 1; seed 2 task 0 (1−0 + 1−0)/2
	// = 1, task 1 (1−1 + 1−0)/2 = ½: mean 0.625.
	if math.Abs(c.Bootstrap.Mean-0.625) > 1e-12 || c.Bootstrap.Units != 4 {
		t.Errorf("bootstrap %+v, want mean 0.625 over 4 tasks", c.Bootstrap)
	}
	var p []float64
	for _, c := range cmps {
		p = append(p, c.Bootstrap.P)
	}
	for i, h := range stats.Holm(p) {
		if cmps[i].Holm != h || cmps[i].Significant != (h <= 0.05) {
			t.Errorf("comparison %d: Holm %v, significant %v; want %v", i, cmps[i].Holm, cmps[i].Significant, h)
		}
	}
	st := NewStudy([]*Result{a, b})
	if len(st.Rows) != 3 || st.Rows[2].SuccessMean != 0.875 || math.Abs(st.Rows[2].SuccessSD-math.Sqrt(0.03125)) > 1e-12 {
		t.Errorf("study rows %+v: want SWEET-RL's success 0.875 ± %v", st.Rows, math.Sqrt(0.03125))
	}
	if !slices.Equal(st.Seeds, []uint64{1, 2}) {
		t.Errorf("seeds %v", st.Seeds)
	}
}

// TestStudy runs a miniature seeds study of the tally family with the
// equal tuning budget, per-epoch validation and the diagnostics (train
// demo --full): every method validates the same number of settings, every
// policy keeps an epoch of its setting, the DPO methods record their
// log-ratios, every diagnostic row runs, and the study compares the
// methods over the seeds.
func TestStudy(t *testing.T) {
	c := tiny(t, "tally", t.TempDir())
	from := t.TempDir()
	c.K, c.RLTasks, c.ValTasks, c.Settings, c.Diagnostics, c.BestOfN, c.DataFraction = 6, 8, 3, 2, true, 2, 0.2
	c.EpochSelect = true
	for _, seed := range []uint64{3, 4} {
		cs := c
		cs.Seed, cs.From = seed, filepath.Join(from, "seed-"+string(rune('0'+seed)))
		fixture(t, cs)
	}
	c.From = from
	var log strings.Builder
	c.Log = &log
	if err := RunSeeds(context.Background(), c, 2); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var st Study
	written := readFile(t, filepath.Join(c.OutDir, StudyFile))
	if err := json.Unmarshal(written, &st); err != nil {
		t.Fatal(err)
	}
	// The study of the seeds' saved results is the study the run wrote.
	c.From = ""
	if err := ReportSeeds(c, 2); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, filepath.Join(c.OutDir, StudyFile)); !bytes.Equal(again, written) {
		t.Errorf("the study of the saved results differs from the run's:\n%s\nwant\n%s", again, written)
	}
	for _, bad := range []struct {
		seed uint64
		n    int
		want string
	}{
		{seed: 3, n: 3, want: "seed-5"}, // a seed that did not run
		{seed: 2, n: 2, want: "seed-2"}, // nor this one
	} {
		cb := c
		cb.Seed = bad.seed
		if err := ReportSeeds(cb, bad.n); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("study of %d seeds from %d: error %v, want one naming %s", bad.n, bad.seed, err, bad.want)
		}
	}
	cb := c
	cb.Family = "keys"
	if err := ReportSeeds(cb, 2); err == nil || !strings.Contains(err.Error(), "tally family at seed 3") {
		t.Errorf("a study of another family: error %v", err)
	}
	want := []string{"SFT start", "rejection fine-tuning", "multi-turn DPO", "SWEET-RL (paper's score)", RowBestOfN, RowOracle, RowNoInfo, RowRPO}
	var got []string
	for _, r := range st.Rows {
		got = append(got, r.Method)
		if len(r.Success) != 2 {
			t.Errorf("%s: %d seeds", r.Method, len(r.Success))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("study rows %q, want %q:\n%s", got, want, log.String())
	}
	if len(st.Comparisons) != len(comparisons) || !slices.Equal(st.Seeds, []uint64{3, 4}) {
		t.Errorf("%d comparisons over seeds %v, want %d over [3 4]", len(st.Comparisons), st.Seeds, len(comparisons))
	}
	for _, seed := range []string{"seed-3", "seed-4"} {
		var res Result
		if err := json.Unmarshal(readFile(t, filepath.Join(c.OutDir, seed, "results.json")), &res); err != nil {
			t.Fatal(err)
		}
		for _, rw := range res.Rows {
			if len(rw.Outcomes) != c.TestTasks*c.EvalSeeds {
				t.Errorf("%s %s: outcomes %q", seed, rw.Method, rw.Outcomes)
			}
			pref := rw.Method != "SFT start" && rw.Method != "rejection fine-tuning" && rw.Method != RowBestOfN
			if pref != (rw.ChosenLogRatio != nil) || (rw.Method != "SFT start" && rw.Method != RowBestOfN) != (rw.Setting != nil) {
				t.Errorf("%s %s: setting %v, log-ratios %v", seed, rw.Method, rw.Setting, rw.ChosenLogRatio)
			}
			if set := rw.Setting; set != nil && (set.Epochs > 1 && (set.Kept < 1 || set.Kept > set.Epochs) || set.Epochs == 1 && set.Kept != 0) {
				t.Errorf("%s %s: setting %v: want the epoch kept of its %d named (of more than one)", seed, rw.Method, set, set.Epochs)
			}
		}
		if !res.EpochSelect {
			t.Errorf("%s: results.json does not record the per-epoch validation", seed)
		}
		// a choice per policy (rft, mtdpo, 4 actors) and per critic (2), each of 2 settings
		if len(res.Choices) != 8 {
			t.Errorf("%s: %d choices, want 8: %q", seed, len(res.Choices), res.Choices)
		}
		for i, ch := range res.Choices {
			if !strings.Contains(ch, "of 2 settings") {
				t.Errorf("%s: choice %q is not one of 2 settings", seed, ch)
			}
			if policy := !strings.HasPrefix(ch, "critic"); policy != strings.Contains(ch, "each at its best epoch") {
				t.Errorf("%s: choice %d, %q: want each policy setting's best epoch, and the critics' last", seed, i, ch)
			}
		}
		for _, cr := range res.Critics {
			if cr.Setting == nil || cr.Epoch != cr.Setting.Epochs {
				t.Errorf("%s: critic %s kept epoch %d of setting %v: want its last", seed, cr.Name, cr.Epoch, cr.Setting)
			}
		}
		for i := range 2 {
			recs, err := metrics.Read(filepath.Join(c.OutDir, seed, "metrics", "mtdpo-"+string(rune('0'+i)), trainer.MetricsName))
			if err != nil || len(recs) == 0 {
				t.Fatalf("%s: multi-turn DPO setting %d's metrics: %v", seed, i, err)
			}
			if _, ok := recs[len(recs)-1].Get(rl.ChosenLogRatio); !ok {
				t.Errorf("%s: multi-turn DPO setting %d recorded no chosen log-ratio", seed, i)
			}
		}
	}
	for _, s := range []string{"oracle-advantage actor: the actor's candidates ranked by the exact value", "the tally family over training seeds 3, 4", "paired comparisons of success"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("the log lacks %q", s)
		}
	}
}
