package rl

import (
	"fmt"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// GroupByTask returns the indices of trajs grouped by task (same problem
// description and ground truth), groups in order of first appearance.
func GroupByTask(trajs []sweetrl.Trajectory) [][]int {
	type key struct{ problem, truth string }
	at := map[key]int{}
	var groups [][]int
	for i, t := range trajs {
		k := key{t.Task.ProblemDescription, t.Task.GroundTruth}
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// taskPairs forms, for each task, the reference's trajectory pairs
// (sweetrl.PairsByReward: the first attempt with reward 1 against every
// attempt with a lower reward) as indices into trajs.
func taskPairs(trajs []sweetrl.Trajectory) []sweetrl.Pair {
	var out []sweetrl.Pair
	for _, g := range GroupByTask(trajs) {
		rewards := make([]float64, len(g))
		for k, i := range g {
			rewards[k] = trajs[i].Reward
		}
		for _, p := range sweetrl.PairsByReward(rewards) {
			out = append(out, sweetrl.Pair{Chosen: g[p.Chosen], Rejected: g[p.Rejected]})
		}
	}
	return out
}

// CriticScore is how the log-probability critic scores a trajectory.
type CriticScore int

const (
	// ScoreTurn is the paper's score (arXiv 2503.15478, Eq. 2–3): the sum
	// over agent turns of each turn's mean log-probability, so that the
	// Bradley–Terry margin is Σ_t β·A(o_t⁺, a_t⁺, c) − Σ_t β·A(o_t⁻, a_t⁻, c)
	// with A the turn's mean log-ratio against the frozen reference.
	ScoreTurn CriticScore = iota
	// ScoreTrajectory is the released code's score (the OpenRLHF fork's DPO
	// trainer with --mean_log_prob): one mean over every agent-turn token of
	// the trajectory.
	ScoreTrajectory
)

// String returns the flag value of s: "turn" or "trajectory".
func (s CriticScore) String() string {
	if s == ScoreTrajectory {
		return "trajectory"
	}
	return "turn"
}

// ParseCriticScore parses "turn" (the paper's) or "trajectory" (the
// released code's).
func ParseCriticScore(v string) (CriticScore, error) {
	switch v {
	case "turn":
		return ScoreTurn, nil
	case "trajectory":
		return ScoreTrajectory, nil
	}
	return 0, fmt.Errorf("critic score %q: want turn (the paper's) or trajectory (the released code's)", v)
}

// CriticPairs forms the critic's training pairs from scored trajectories
// (several per task): the reference's pairs of each task, each side the
// critic's view of the trajectory (CriticSeq: the ground truth, then the
// agent's system prompt and the dialogue, weighted for the score kind).
// Trained with TrainPreferences at β = 0.1 this is the Bradley–Terry critic
// loss: the paper's with ScoreTurn, the released code's with
// ScoreTrajectory.
func CriticPairs(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory, kind CriticScore) ([]PrefPair, error) {
	return seqPairs(trajs, func(t sweetrl.Trajectory) (Seq, error) { return CriticSeq(tok, system, t, kind) })
}

// TrajectoryPairs forms the multi-turn DPO baseline's pairs: the same
// trajectory pairs as the critic's, each side the agent's view (its system
// prompt and the dialogue, no ground truth) scored by the summed
// log-probability of every agent-turn token.
func TrajectoryPairs(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]PrefPair, error) {
	return seqPairs(trajs, func(t sweetrl.Trajectory) (Seq, error) { return PolicySeq(tok, system, t) })
}

func seqPairs(trajs []sweetrl.Trajectory, view func(sweetrl.Trajectory) (Seq, error)) ([]PrefPair, error) {
	cache := map[int]Seq{}
	get := func(i int) (Seq, error) {
		if s, ok := cache[i]; ok {
			return s, nil
		}
		s, err := view(trajs[i])
		if err != nil {
			return Seq{}, fmt.Errorf("trajectory %d: %w", i, err)
		}
		cache[i] = s
		return s, nil
	}
	var out []PrefPair
	for _, p := range taskPairs(trajs) {
		c, err := get(p.Chosen)
		if err != nil {
			return nil, err
		}
		r, err := get(p.Rejected)
		if err != nil {
			return nil, err
		}
		out = append(out, PrefPair{Chosen: c, Rejected: r})
	}
	return out, nil
}
