package frontend

import (
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMeanCosine(t *testing.T) {
	got, err := MeanCosine([]float64{0.9, 0.5, 0.7, 0.6})
	if err != nil || !near(got, 0.675) {
		t.Errorf("MeanCosine = %v, %v; want 0.675", got, err)
	}
	if _, err := MeanCosine(nil); err == nil {
		t.Error("mean of no tasks gave no error")
	}
	if _, err := MeanCosine([]float64{0.5, math.NaN()}); err == nil {
		t.Error("mean with NaN gave no error")
	}
}

func TestCompareWinRate(t *testing.T) {
	for _, tc := range []struct {
		name               string
		a, b               []float64
		margin             float64
		wins, ties, losses int
		rate, lo, hi       float64
	}{
		// Differences 0.1, 0, −0.05, 0 with ε = 0.02: win, tie, loss, tie.
		// Scores 1, ½, 0, ½: rate ½; deviations ½, 0, −½, 0 give
		// s² = 0.5/3 = 1/6, half width 1.96·s/√4 = 0.98·√(1/6) = 0.4000833.
		{"mixed", []float64{0.9, 0.5, 0.7, 0.6}, []float64{0.8, 0.5, 0.75, 0.6}, 0.02, 1, 2, 1, 0.5, 0.5 - 0.98*math.Sqrt(1.0/6), 0.5 + 0.98*math.Sqrt(1.0/6)},
		// ε = 0: the equal tasks still tie, the others are decided.
		{"no margin", []float64{0.9, 0.5, 0.7, 0.6}, []float64{0.8, 0.5, 0.75, 0.6}, 0, 1, 2, 1, 0.5, 0.5 - 0.98*math.Sqrt(1.0/6), 0.5 + 0.98*math.Sqrt(1.0/6)},
		// ε = 0.2 makes every task a tie: s = 0, the interval is the point.
		{"wide margin", []float64{0.9, 0.5, 0.7}, []float64{0.8, 0.5, 0.75}, 0.2, 0, 3, 0, 0.5, 0.5, 0.5},
		// Scores 1, 1, 0: rate ⅔; deviations ⅓, ⅓, −⅔ give s² = (2/3)/2 = ⅓,
		// s/√3 = ⅓, half width 0.6533333; the upper bound is clipped to 1.
		{"clipped", []float64{0.9, 0.9, 0.1}, []float64{0.1, 0.1, 0.9}, 0, 2, 0, 1, 2.0 / 3, 2.0/3 - 1.96/3, 1},
		{"one task", []float64{0.9}, []float64{0.1}, 0, 1, 0, 0, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := CompareWinRate(tc.a, tc.b, tc.margin)
			if err != nil {
				t.Fatal(err)
			}
			if w.Wins != tc.wins || w.Ties != tc.ties || w.Losses != tc.losses {
				t.Errorf("wins/ties/losses = %d/%d/%d, want %d/%d/%d", w.Wins, w.Ties, w.Losses, tc.wins, tc.ties, tc.losses)
			}
			if math.Abs(w.Rate-tc.rate) > 1e-9 || math.Abs(w.Lo-tc.lo) > 1e-9 || math.Abs(w.Hi-tc.hi) > 1e-9 {
				t.Errorf("rate %v [%v, %v], want %v [%v, %v]", w.Rate, w.Lo, w.Hi, tc.rate, tc.lo, tc.hi)
			}
		})
	}
}

func TestCompareWinRateErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   []float64
		margin float64
		want   string
	}{
		{"lengths", []float64{1}, []float64{1, 2}, 0, "1 cosines against 2"},
		{"empty", nil, nil, 0, "no tasks"},
		{"negative margin", []float64{1}, []float64{1}, -0.1, "tie margin"},
		{"NaN", []float64{math.NaN()}, []float64{1}, 0, "task 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompareWinRate(tc.a, tc.b, tc.margin)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestAlignByTask(t *testing.T) {
	tr := func(task string, r float64) sweetrl.Trajectory {
		return sweetrl.Trajectory{Task: sweetrl.Task{ProblemDescription: task}, Reward: r}
	}
	a := []sweetrl.Trajectory{tr("x", 0.9), tr("y", 0.4)}
	b := []sweetrl.Trajectory{tr("y", 0.6), tr("x", 0.7)}
	ra, rb, err := AlignByTask(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ra) != 2 || ra[0] != 0.9 || rb[0] != 0.7 || ra[1] != 0.4 || rb[1] != 0.6 {
		t.Errorf("aligned %v and %v", ra, rb)
	}
	for _, tc := range []struct {
		name string
		a, b []sweetrl.Trajectory
		want string
	}{
		{"missing in B", a, b[:1], "method B has no trajectory"},
		{"missing in A", a[:1], b, "method A has no trajectory"},
		{"twice in A", []sweetrl.Trajectory{a[0], a[0]}, b, "method A has two"},
		{"twice in B", a, append(b, b[0]), "method B has two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := AlignByTask(tc.a, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
