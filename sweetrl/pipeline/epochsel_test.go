package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// TestEpochEnds checks where rejection fine-tuning's epochs end: epoch e
// at step round(e·steps/epochs), the last at the run's last step.
func TestEpochEnds(t *testing.T) {
	tests := []struct {
		steps, epochs int
		want          map[int]int
	}{
		{20, 1, map[int]int{20: 1}},
		{20, 2, map[int]int{10: 1, 20: 2}},
		{20, 3, map[int]int{7: 1, 13: 2, 20: 3}},
		{25, 3, map[int]int{8: 1, 17: 2, 25: 3}},
		{2, 3, map[int]int{1: 2, 2: 3}}, // epochs 1 and 2 end at step 1: the later is validated
	}
	for _, tc := range tests {
		if got := epochEnds(tc.steps, tc.epochs); !maps.Equal(got, tc.want) {
			t.Errorf("epochEnds(%d, %d) = %v, want %v", tc.steps, tc.epochs, got, tc.want)
		}
	}
}

// TestEpochSelect trains rejection fine-tuning and a DPO policy with a
// validation written by hand (each call's success given in turn): with
// Config.EpochSelect each epoch is validated once, the setting keeps the
// epoch of the best validation — its weights, its statistics, and its
// number in the setting and the choice (of more than one epoch) — and
// without it only the last epoch is validated and kept.
func TestEpochSelect(t *testing.T) {
	ctx := context.Background()
	c := tiny(t, "tally", t.TempDir())
	c.From = t.TempDir()
	fixture(t, c)
	tests := []struct {
		method      string
		epochSelect bool
		epochs      int
		success     []float64 // the validation's success at each call
		kept        int       // the epoch kept (0: the last, unchosen)
		wantCall    int       // the call whose weights are kept (1, 2, …)
	}{
		{"rft", true, 2, []float64{0.9, 0.1}, 1, 1},
		{"rft", false, 2, []float64{0.9}, 0, 1},
		{"mtdpo", true, 3, []float64{0.5, 0.9, 0.2}, 2, 2},
		{"mtdpo", true, 3, []float64{0.1, 0.2, 0.3}, 3, 3},
		{"mtdpo", false, 3, []float64{0.5}, 0, 1},
		{"mtdpo", true, 1, []float64{0.5}, 0, 1}, // one epoch is no choice
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/select=%v/%v", tc.method, tc.epochSelect, tc.success), func(t *testing.T) {
			cs := c
			cs.OutDir, cs.EpochSelect = t.TempDir(), tc.epochSelect
			r, trajs := prepared(t, ctx, cs)
			r.rlTrain, r.val = trajs, make([]sweetrl.Task, 3)
			var seen []snapshot
			r.validator = func(_ string, ad *llama.Adapter) (rl.Summary, Health, error) {
				seen = append(seen, take(r.m.Backend(), ad, nil))
				if len(seen) > len(tc.success) {
					t.Fatalf("validation call %d, want %d calls", len(seen), len(tc.success))
				}
				s := tc.success[len(seen)-1]
				return rl.Summary{Success: s, PassRate: s}, Health{}, nil
			}
			var p *policy
			var err error
			stats := map[int]fitStats{} // each epoch's, as the run reported them
			switch tc.method {
			case "rft":
				r.c.LR.RFT = 1e-3
				p, err = r.trainRFT()
			case "mtdpo":
				pairs, perr := rl.TrajectoryPairs(r.tok, r.f.Protocol.System, trajs)
				if perr != nil || len(pairs) == 0 {
					t.Fatalf("%d pairs: %v", len(pairs), perr)
				}
				def := Setting{LR: 3e-3, Beta: 0.1, Epochs: tc.epochs, Share: 1}
				p, err = r.choosePolicy("mtdpo", "pref", "mtdpo", "multi-turn DPO", def, func(ad *llama.Adapter, s Setting, dir string, after func(int, fitStats) error) (fitStats, error) {
					if after == nil {
						return r.fitPref(ad, pairs, s, 0, true, dir, nil)
					}
					return r.fitPref(ad, pairs, s, 0, true, dir, func(e int, fs fitStats) error {
						stats[e] = fs
						return after(e, fs)
					})
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(tc.success) {
				t.Fatalf("%d validations, want %d (one per epoch with epoch selection, else one)", len(seen), len(tc.success))
			}
			if p.set.Epochs != tc.epochs || p.set.Kept != tc.kept {
				t.Errorf("setting %v: %d epochs, epoch %d kept; want %d, epoch %d kept", p.set, p.set.Epochs, p.set.Kept, tc.epochs, tc.kept)
			}
			got := take(r.m.Backend(), p.ad, nil)
			if !reflect.DeepEqual(got, seen[tc.wantCall-1]) {
				t.Errorf("the kept adapter is not the weights validated at call %d", tc.wantCall)
			}
			if tc.wantCall < len(seen) && reflect.DeepEqual(got, seen[len(seen)-1]) {
				t.Errorf("the kept adapter is the last epoch's, not epoch %d's", tc.kept)
			}
			if e := max(tc.kept, 1); tc.method == "mtdpo" && tc.epochSelect && p.fit != stats[e] {
				t.Errorf("the kept statistics %+v are not epoch %d's %+v (of %v)", p.fit, e, stats[e], stats)
			}
			choice := r.res.Choices[len(r.res.Choices)-1]
			if wantKept := fmt.Sprintf("epoch %d of %d kept", tc.kept, tc.epochs); (tc.kept > 0) != strings.Contains(choice, wantKept) {
				t.Errorf("choice %q: want %q in it only where an epoch was chosen", choice, wantKept)
			}
			saved, err := r.m.LoadPEFT(filepath.Join(cs.OutDir, tc.method))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(take(r.m.Backend(), saved, nil), got) {
				t.Error("the saved adapter is not the kept one")
			}
		})
	}
}

// TestStudyRefusesMixedDesigns checks that a study refuses seeds run with
// and without per-epoch validation, naming the file, and combines seeds
// that agree.
func TestStudyRefusesMixedDesigns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		designs []bool // each seed's EpochSelect
		want    string // in the error ("": none)
	}{
		{"all with", []bool{true, true}, ""},
		{"all without", []bool{false, false}, ""},
		{"second with", []bool{false, true}, filepath.Join("seed-2", ResultsFile)},
		{"third without", []bool{true, true, false}, filepath.Join("seed-3", ResultsFile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, sel := range tc.designs {
				res := result(uint64(i+1), map[string]string{"SFT start": "0011", "multi-turn DPO": "0111", "SWEET-RL (paper's score)": "1111"})
				res.EpochSelect = sel
				js, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				sub := filepath.Join(dir, fmt.Sprintf("seed-%d", i+1))
				if err := os.MkdirAll(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(sub, ResultsFile), js, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var log strings.Builder
			err := ReportSeeds(Config{Family: "tally", Seed: 1, OutDir: dir, Log: &log}, len(tc.designs))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("seeds of one design: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "per-epoch validation")):
				t.Errorf("mixed designs: error %v, want one naming %s and per-epoch validation", err, tc.want)
			}
		})
	}
}
