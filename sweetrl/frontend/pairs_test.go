package frontend

import (
	"reflect"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

func TestCriticPairs(t *testing.T) {
	for _, tc := range []struct {
		name string
		sims []float64
		want []sweetrl.Pair
	}{
		{"none", nil, nil},
		{"one attempt", []float64{0.9}, nil},
		{"gap below", []float64{0.80, 0.75}, nil},
		{"gap exactly 0.1 (0.8 − 0.7)", []float64{0.7, 0.8}, []sweetrl.Pair{{Chosen: 1, Rejected: 0}}},
		{"gap of 0.5", []float64{0.9, 0.4}, []sweetrl.Pair{{Chosen: 0, Rejected: 1}}},
		{"equal", []float64{0.6, 0.6}, nil},
		{"three", []float64{0.5, 0.9, 0.55}, []sweetrl.Pair{{Chosen: 1, Rejected: 0}, {Chosen: 1, Rejected: 2}}},
		{"all pairs", []float64{0.1, 0.3, 0.5}, []sweetrl.Pair{{Chosen: 1, Rejected: 0}, {Chosen: 2, Rejected: 0}, {Chosen: 2, Rejected: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CriticPairs(tc.sims); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CriticPairs(%v) = %v, want %v", tc.sims, got, tc.want)
			}
		})
	}
}

func TestTrajectoryPairs(t *testing.T) {
	tr := func(task string, r float64) sweetrl.Trajectory {
		return sweetrl.Trajectory{Task: sweetrl.Task{ProblemDescription: task}, Reward: r}
	}
	trajs := []sweetrl.Trajectory{
		tr("a", 0.9), tr("b", 0.5), tr("a", 0.6), tr("b", 0.55), tr("b", 0.8), tr("a", 0.95),
	}
	// Task a: trajectories 0, 2, 5 (0.9, 0.6, 0.95): pairs (0>2), (5>2).
	// Task b: trajectories 1, 3, 4 (0.5, 0.55, 0.8): pairs (4>1), (4>3).
	want := []sweetrl.Pair{{Chosen: 0, Rejected: 2}, {Chosen: 5, Rejected: 2}, {Chosen: 4, Rejected: 1}, {Chosen: 4, Rejected: 3}}
	if got := TrajectoryPairs(trajs); !reflect.DeepEqual(got, want) {
		t.Errorf("TrajectoryPairs = %v, want %v", got, want)
	}
}

func TestBestAttempts(t *testing.T) {
	tr := func(task string, r float64) sweetrl.Trajectory {
		return sweetrl.Trajectory{Task: sweetrl.Task{ProblemDescription: task}, Reward: r}
	}
	for _, tc := range []struct {
		name  string
		trajs []sweetrl.Trajectory
		want  []int
	}{
		{"none", nil, []int{}},
		{"one task", []sweetrl.Trajectory{tr("a", 0.2), tr("a", 0.7), tr("a", 0.5)}, []int{1}},
		{"ties: the first", []sweetrl.Trajectory{tr("a", 0.7), tr("a", 0.7)}, []int{0}},
		{"two tasks, in file order", []sweetrl.Trajectory{tr("a", 0.9), tr("b", 0.1), tr("a", 0.3), tr("b", 0.4)}, []int{0, 3}},
		{"a later task's best first", []sweetrl.Trajectory{tr("a", 0.1), tr("b", 0.9), tr("a", 0.8)}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BestAttempts(tc.trajs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BestAttempts = %v, want %v", got, tc.want)
			}
		})
	}
}
