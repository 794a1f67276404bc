package frontend

import (
	"slices"

	"github.com/turnwise/turnwise/sweetrl"
)

// PairMinGap is the least similarity gap between two attempts of a task
// that makes them a critic pair.
const PairMinGap = 0.1

// CriticPairs forms the critic's training pairs from the similarities of
// one task's attempts, as the reference does for frontend tasks: every two
// attempts i < j whose similarities differ by at least PairMinGap make a
// pair, the higher chosen. Pairs come in the order (0,1), (0,2), …, (1,2),
// ….
func CriticPairs(sims []float64) []sweetrl.Pair {
	var pairs []sweetrl.Pair
	for i := range sims {
		for j := i + 1; j < len(sims); j++ {
			switch {
			case sims[i]-sims[j] >= PairMinGap:
				pairs = append(pairs, sweetrl.Pair{Chosen: i, Rejected: j})
			case sims[j]-sims[i] >= PairMinGap:
				pairs = append(pairs, sweetrl.Pair{Chosen: j, Rejected: i})
			}
		}
	}
	return pairs
}

// TrajectoryPairs forms the critic pairs of trajs, whose rewards are their
// similarities: trajectories are grouped by their task's
// problem_description, and each group's CriticPairs are returned as
// indices into trajs, groups in the order of their first trajectory.
func TrajectoryPairs(trajs []sweetrl.Trajectory) []sweetrl.Pair {
	var order []string
	groups := map[string][]int{}
	for i, tr := range trajs {
		k := tr.Task.ProblemDescription
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var pairs []sweetrl.Pair
	for _, k := range order {
		idx := groups[k]
		sims := make([]float64, len(idx))
		for n, i := range idx {
			sims[n] = trajs[i].Reward
		}
		for _, p := range CriticPairs(sims) {
			pairs = append(pairs, sweetrl.Pair{Chosen: idx[p.Chosen], Rejected: idx[p.Rejected]})
		}
	}
	return pairs
}

// BestAttempts returns the trajectories rejection fine-tuning imitates on
// frontend tasks, as indices into trajs in their order: each task's attempt
// with the highest similarity (its reward), the first of equal ones, tasks
// told apart by their problem_description. The reference code gives no
// such rule for frontend tasks (its rule for backend tasks, a reward of 1,
// is a perfect screenshot here); this is the best-of-k attempt its
// evaluation reports.
func BestAttempts(trajs []sweetrl.Trajectory) []int {
	best := map[string]int{}
	var order []string
	for i, tr := range trajs {
		k := tr.Task.ProblemDescription
		b, ok := best[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || tr.Reward > trajs[b].Reward {
			best[k] = i
		}
	}
	out := make([]int, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	slices.Sort(out)
	return out
}
