package rl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// AdvantageFunc scores the candidate replies cands of one agent turn of an
// episode of task, before being the dialogue up to that turn: a higher
// value ranks a candidate higher.
type AdvantageFunc func(task sweetrl.Task, before []sweetrl.Turn, cands []string) ([]float64, error)

// CriticAdvantage is the advantage of the critic c (Critic.Advantages),
// the policy pol giving the policy baseline.
func CriticAdvantage(c Critic, pol *Sampler, system string, batchTokens int) AdvantageFunc {
	return func(task sweetrl.Task, before []sweetrl.Turn, cands []string) ([]float64, error) {
		return c.Advantages(pol, system, task, before, cands, batchTokens)
	}
}

// TurnCandidates are the actor's candidates, sampled once so that several
// advantages (the critic's, an ablation's, an oracle's) can rank the same
// candidates: each pairs them as ActorPairs does with its critic.
type TurnCandidates struct {
	trajs  []sweetrl.Trajectory
	turns  []turnRef
	outs   [][]string
	polSum [][]Seq
	pairs  rand.PCG // the pair draws' source after the turns' shuffle
	o      ActorOptions
}

// SampleTurnCandidates samples the candidates of ActorPairs — the same
// turns, and the same draws of pol — without scoring them. It runs in one
// process (o.Comm is not used).
func SampleTurnCandidates(trajs []sweetrl.Trajectory, pol *Sampler, o ActorOptions) (*TurnCandidates, error) {
	if o.Candidates < 2 || o.PairsPerTurn <= 0 || o.DataFraction <= 0 || o.DataFraction > 1 {
		return nil, fmt.Errorf("actor data: %d candidates, %d pairs per turn, data fraction %g", o.Candidates, o.PairsPerTurn, o.DataFraction)
	}
	tc := &TurnCandidates{trajs: trajs, o: o}
	for i, t := range trajs {
		for j, h := range t.DialogueHistory {
			if h.Role == sweetrl.RoleAssistant {
				tc.turns = append(tc.turns, turnRef{i, j})
			}
		}
	}
	if len(tc.turns) == 0 {
		return nil, errors.New("the trajectories have no agent turn")
	}
	tc.pairs = *rand.NewPCG(o.Seed, 0x6163746f72)
	rng := rand.New(&tc.pairs)
	rng.Shuffle(len(tc.turns), func(i, j int) { tc.turns[i], tc.turns[j] = tc.turns[j], tc.turns[i] })
	tc.turns = tc.turns[:max(1, int(math.Round(o.DataFraction*float64(len(tc.turns)))))]
	var prog *metrics.Progress
	if o.Progress != nil {
		prog = metrics.NewProgress(o.Progress, metrics.ProgressOptions{Total: int64(len(tc.turns)), Label: "actor turns", Every: int64(max(1, len(tc.turns)/10))})
	}
	calls := pol.calls
	for k, tr := range tc.turns {
		t := trajs[tr.traj]
		prompt := withSystem(o.Protocol.System, sweetrl.TurnsToMessages(t.DialogueHistory[:tr.turn]))
		pol.calls = calls + uint64(k)
		outs, err := pol.Candidates(prompt, o.Candidates)
		if err != nil {
			return nil, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
		var seqs []Seq
		for _, out := range outs {
			ps, err := lastTurnSeq(pol.Tok, nil, append(prompt[:len(prompt):len(prompt)], tokenizer.Message{Role: sweetrl.RoleAssistant, Content: out}), sum)
			if err != nil {
				return nil, err
			}
			seqs = append(seqs, ps)
		}
		tc.outs, tc.polSum = append(tc.outs, outs), append(tc.polSum, seqs)
		if prog != nil {
			prog.Update(int64(k+1), math.NaN(), math.NaN(), math.NaN())
		}
	}
	pol.calls = calls + uint64(len(tc.turns))
	if prog != nil {
		prog.Done()
	}
	return tc, nil
}

// Turns returns the number of turns sampled.
func (tc *TurnCandidates) Turns() int { return len(tc.turns) }

// Pairs ranks every turn's candidates by adv and forms the actor's pairs
// from them as ActorPairs does (with its critic's advantage, the same
// pairs): the pair draws start afresh at each call. With dropEqual a pair
// of two candidates of equal advantage is dropped too (counted as tied):
// an exact value ties often, a critic's advantage hardly ever.
func (tc *TurnCandidates) Pairs(adv AdvantageFunc, dropEqual bool) ([]PrefPair, ActorStats, error) {
	var st ActorStats
	src := tc.pairs
	rng := rand.New(&src)
	var pairs []PrefPair
	for k, tr := range tc.turns {
		t := tc.trajs[tr.traj]
		outs := tc.outs[k]
		a, err := adv(t.Task, t.DialogueHistory[:tr.turn], outs)
		if err != nil {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
		if len(a) != len(outs) {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %d advantages for %d candidates", tr.traj, tr.turn, len(a), len(outs))
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range a {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		st.MeanSpread += (hi - lo) / float64(len(tc.turns))
		for _, p := range sweetrl.PairsByAdvantage(a, tc.o.PairsPerTurn, rng) {
			if outs[p.Chosen] == outs[p.Rejected] || (dropEqual && a[p.Chosen] == a[p.Rejected]) {
				st.TiedPairs++
				continue
			}
			pairs = append(pairs, PrefPair{Chosen: tc.polSum[k][p.Chosen], Rejected: tc.polSum[k][p.Rejected]})
		}
		st.Turns++
		st.Candidates += len(outs)
	}
	st.Pairs = len(pairs)
	return pairs, st, nil
}

// TaskAgent is a BatchAgent that RunEpisodes also tells each episode's
// task and dialogue so far: an agent that may read what a deployed agent
// cannot, such as the critic-guided best-of-N diagnostic (BestOfN), whose
// critic reads the ground truth.
type TaskAgent interface {
	BatchAgent
	ActTasks(ctx context.Context, tasks []sweetrl.Task, histories [][]sweetrl.Turn, convs [][]tokenizer.Message) (inputs, outputs []string, err error)
}

// BestOfN is a TaskAgent that samples N replies from Policy for each turn
// and plays the one Advantage ranks highest (the first of equal ones).
// With a critic's advantage (CriticAdvantage) it measures the critic's
// credit assignment without training an actor; since that critic reads the
// ground truth, it is a diagnostic, not a policy that could be deployed.
type BestOfN struct {
	Policy    *Sampler
	N         int
	Advantage AdvantageFunc
}

// ActBatch refuses: BestOfN needs the tasks (ActTasks).
func (b *BestOfN) ActBatch(context.Context, [][]tokenizer.Message) ([]string, []string, error) {
	return nil, nil, errors.New("best-of-N needs each episode's task: play it with RunEpisodes")
}

// ActTasks implements TaskAgent: the N samples of every conversation are
// generated together, in the policy's batches.
func (b *BestOfN) ActTasks(ctx context.Context, tasks []sweetrl.Task, histories [][]sweetrl.Turn, convs [][]tokenizer.Message) ([]string, []string, error) {
	if b.N < 1 {
		return nil, nil, fmt.Errorf("best-of-%d", b.N)
	}
	rep := make([][]tokenizer.Message, 0, b.N*len(convs))
	for _, c := range convs {
		for range b.N {
			rep = append(rep, c)
		}
	}
	ins, outs, err := b.Policy.ActBatch(ctx, rep)
	if err != nil {
		return nil, nil, err
	}
	inputs, outputs := make([]string, len(convs)), make([]string, len(convs))
	for i := range convs {
		cands := outs[i*b.N : (i+1)*b.N]
		adv, err := b.Advantage(tasks[i], histories[i], cands)
		if err != nil {
			return nil, nil, err
		}
		best := 0
		for k, a := range adv {
			if a > adv[best] {
				best = k
			}
		}
		inputs[i], outputs[i] = ins[i*b.N], cands[best]
	}
	return inputs, outputs, nil
}
