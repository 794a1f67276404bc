package frontend

import (
	"errors"
	"fmt"
	"math"

	"github.com/turnwise/turnwise/sweetrl"
)

// MeanCosine returns the mean of cosines, the similarity of a method over
// a set of tasks (one answer per task). It is an error to pass none or a
// value that is not finite.
func MeanCosine(cosines []float64) (float64, error) {
	if len(cosines) == 0 {
		return 0, errors.New("frontend: mean cosine of no tasks")
	}
	var s float64
	for i, c := range cosines {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return 0, fmt.Errorf("frontend: cosine %d is %v", i, c)
		}
		s += c
	}
	return s / float64(len(cosines)), nil
}

// WinRate is method A's record against method B on the same tasks.
type WinRate struct {
	// Wins, Ties and Losses count tasks: A wins a task when its cosine
	// exceeds B's by more than the tie margin, loses when B's exceeds
	// A's by more than the margin, and ties otherwise.
	Wins, Ties, Losses int
	// Rate is (Wins + Ties/2) / tasks: the mean of the per-task scores
	// 1, 1/2 and 0.
	Rate float64
	// Lo and Hi bound Rate's 95% interval: Rate ∓ 1.96·s/√n, where s is
	// the sample standard deviation (divisor n−1) of the per-task scores
	// and n the number of tasks, clipped to [0, 1]. With one task the
	// interval is [0, 1].
	Lo, Hi float64
}

// CompareWinRate returns the win rate of A against B: a[i] and b[i] are
// the two methods' cosines on task i, and margin ≥ 0 is the tie margin ε.
// It is an error to pass slices of different lengths, no tasks, a value
// that is not finite or a negative margin.
func CompareWinRate(a, b []float64, margin float64) (WinRate, error) {
	if len(a) != len(b) {
		return WinRate{}, fmt.Errorf("frontend: win rate of %d cosines against %d", len(a), len(b))
	}
	if len(a) == 0 {
		return WinRate{}, errors.New("frontend: win rate over no tasks")
	}
	if !(margin >= 0) || math.IsInf(margin, 0) {
		return WinRate{}, fmt.Errorf("frontend: tie margin %v is not a finite number ≥ 0", margin)
	}
	var w WinRate
	scores := make([]float64, len(a))
	for i := range a {
		if math.IsNaN(a[i]) || math.IsInf(a[i], 0) || math.IsNaN(b[i]) || math.IsInf(b[i], 0) {
			return WinRate{}, fmt.Errorf("frontend: task %d has cosines %v and %v", i, a[i], b[i])
		}
		switch d := a[i] - b[i]; {
		case d > margin:
			w.Wins++
			scores[i] = 1
		case -d > margin:
			w.Losses++
		default:
			w.Ties++
			scores[i] = 0.5
		}
	}
	n := float64(len(a))
	w.Rate = (float64(w.Wins) + float64(w.Ties)/2) / n
	if len(a) == 1 {
		w.Lo, w.Hi = 0, 1
		return w, nil
	}
	var ss float64
	for _, s := range scores {
		ss += (s - w.Rate) * (s - w.Rate)
	}
	half := 1.96 * math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	w.Lo, w.Hi = max(w.Rate-half, 0), min(w.Rate+half, 1)
	return w, nil
}

// AlignByTask returns the rewards (cosines) of a and b task by task, in the
// order of a's trajectories: each task, named by its problem_description,
// must have exactly one trajectory in a and one in b.
func AlignByTask(a, b []sweetrl.Trajectory) (ra, rb []float64, err error) {
	index := make(map[string]int, len(b))
	for i, tr := range b {
		k := tr.Task.ProblemDescription
		if _, dup := index[k]; dup {
			return nil, nil, fmt.Errorf("frontend: method B has two trajectories of the task %q", short(k))
		}
		index[k] = i
	}
	seen := make(map[string]bool, len(a))
	for _, tr := range a {
		k := tr.Task.ProblemDescription
		if seen[k] {
			return nil, nil, fmt.Errorf("frontend: method A has two trajectories of the task %q", short(k))
		}
		seen[k] = true
		j, ok := index[k]
		if !ok {
			return nil, nil, fmt.Errorf("frontend: method B has no trajectory of the task %q", short(k))
		}
		ra = append(ra, tr.Reward)
		rb = append(rb, b[j].Reward)
	}
	if len(b) != len(a) {
		for k := range index {
			if !seen[k] {
				return nil, nil, fmt.Errorf("frontend: method A has no trajectory of the task %q", short(k))
			}
		}
	}
	return ra, rb, nil
}

// short cuts a problem description for an error message.
func short(s string) string {
	const n = 60
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
