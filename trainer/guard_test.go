package trainer

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGuardEndStep feeds a Guard steps and checks when it stops a run,
// with which error, and when it saves.
func TestGuardEndStep(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	errSave := errors.New("disk full")
	type step struct {
		loss      float64
		due, stop bool
	}
	tests := []struct {
		name    string
		runDir  bool
		saveErr error
		steps   []step
		saves   []int // the steps saved
		wantErr error // the last step's (nil: every step returns nil)
		want    string
	}{
		{"finite losses, checkpoints when due", true, nil, []step{{1, false, false}, {0.5, true, false}, {0.2, true, false}}, []int{2, 3}, nil, ""},
		{"a non-finite run shorter than the limit goes on", true, nil, []step{{nan, false, false}, {inf, false, false}, {1, false, false}, {nan, true, false}, {-inf, false, false}}, []int{4}, nil, ""},
		{"the limit of non-finite losses in a row", true, nil, []step{{1, false, false}, {nan, false, false}, {inf, false, false}, {nan, true, false}}, nil, ErrDiverged,
			"training diverged at step 4: the loss was NaN for 3 steps in a row"},
		{"a diverged step is not saved even when stopping", true, nil, []step{{nan, false, false}, {nan, false, false}, {nan, true, true}}, nil, ErrDiverged, "at step 3"},
		{"stop saves and names the checkpoint", true, nil, []step{{1, false, false}, {1, false, true}}, []int{2}, ErrInterrupted, "interrupted after step 2: checkpoint "},
		{"stop without a run directory", false, nil, []step{{1, false, true}}, nil, ErrInterrupted, "interrupted after step 1 (no run directory: nothing saved)"},
		{"a save's error ends the run", true, errSave, []step{{1, true, false}}, []int{1}, errSave, "disk full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g Guard
			if tc.runDir {
				g.RunDir = t.TempDir()
			}
			var saved []int
			var err error
			for i, s := range tc.steps {
				step := i + 1
				err = g.EndStep(step, s.loss, s.due, s.stop, func() error { saved = append(saved, step); return tc.saveErr })
				if err != nil && i < len(tc.steps)-1 {
					t.Fatalf("step %d: %v; want the run to go on", step, err)
				}
			}
			if !errors.Is(err, tc.wantErr) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("last step: %v; want %v saying %q", err, tc.wantErr, tc.want)
			}
			if errors.Is(err, ErrInterrupted) && tc.runDir && !strings.Contains(err.Error(), filepath.Join(g.RunDir, "step-000002")) {
				t.Errorf("%v does not name the checkpoint", err)
			}
			if !slices.Equal(saved, tc.saves) {
				t.Errorf("saved steps %v, want %v", saved, tc.saves)
			}
		})
	}
	// A rank that takes no part in saving (save nil) stops alike.
	g := Guard{RunDir: t.TempDir()}
	if err := g.EndStep(1, 1, true, true, nil); !errors.Is(err, ErrInterrupted) {
		t.Errorf("stop with no save: %v; want ErrInterrupted", err)
	}
}
