package rl

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl"
)

// ActorOptions control ActorPairs.
type ActorOptions struct {
	Protocol     sweetrl.Protocol // the agent's system prompt
	Candidates   int              // N, candidates sampled per turn (16)
	PairsPerTurn int              // pairs formed per turn (4)
	DataFraction float64          // fraction of the agent turns used (0.1 in the reference)
	BatchTokens  int              // tokens per scoring pass
	Seed         uint64           // picks the turns and the pairs
	Progress     io.Writer        // a progress line counting turns (nil: none)
	// Comm, when it joins several ranks, splits the sampling and scoring
	// across them: of each W consecutive turns rank r takes the r-th, and
	// every rank gathers every turn's candidates and advantages, then forms
	// the pairs as one process does — the same pairs, since a turn's draws
	// depend on its place in the order alone. nil: one process.
	Comm engine.Communicator
	// Backend is the backend Comm runs on (the policy model's).
	Backend engine.Backend
}

// ActorStats describe the turn-wise data.
type ActorStats struct {
	Turns, Candidates, Pairs, TiedPairs int
	// MeanSpread is the mean over turns of the spread (max − min) of the
	// candidates' advantages.
	MeanSpread float64
}

// turnRef is an agent turn of a training trajectory.
type turnRef struct{ traj, turn int }

// scoredTurn is what sampling and scoring one turn gives: the candidates'
// texts, their advantages and the policy's view of each (a Seq scored by
// the sum of the reply's log-probabilities).
type scoredTurn struct {
	Outs   []string
	Adv    []float64
	PolSum []Seq
}

// ActorPairs builds SWEET-RL's turn-wise preference data. For a seeded
// sample of DataFraction of the agent turns of trajs, it samples N
// candidate replies from the policy (pol, continuing the dialogue before
// that turn, best-of-N from the shared prefix), scores each with the
// critic's advantage (Critic.Advantages: the critic's mean log-probability
// of the raw reply after the ground truth, the system prompt and the
// dialogue, minus its baseline's; or, with a value-head critic,
// V(ground truth, dialogue, a)), and
// forms PairsPerTurn pairs per turn of a random top-half candidate against
// a random bottom-half one (sweetrl.PairsByAdvantage). A pair of two identical
// replies has no gradient and is dropped. Each side is the policy's view of
// the turn scored by the summed log-probability of the reply's tokens: the
// shared prefix cancels in DPO. Train the policy on them with
// TrainPreferences and NLLCoef 0.01.
func ActorPairs(trajs []sweetrl.Trajectory, pol *Sampler, critic Critic, o ActorOptions) ([]PrefPair, ActorStats, error) {
	var st ActorStats
	if o.Candidates < 2 || o.PairsPerTurn <= 0 || o.DataFraction <= 0 || o.DataFraction > 1 {
		return nil, st, fmt.Errorf("actor data: %d candidates, %d pairs per turn, data fraction %g", o.Candidates, o.PairsPerTurn, o.DataFraction)
	}
	var turns []turnRef
	for i, t := range trajs {
		for j, h := range t.DialogueHistory {
			if h.Role == sweetrl.RoleAssistant {
				turns = append(turns, turnRef{i, j})
			}
		}
	}
	if len(turns) == 0 {
		return nil, st, errors.New("the trajectories have no agent turn")
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6163746f72))
	rng.Shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	turns = turns[:max(1, int(math.Round(o.DataFraction*float64(len(turns)))))]

	var prog *metrics.Progress
	if o.Progress != nil {
		prog = metrics.NewProgress(o.Progress, metrics.ProgressOptions{Total: int64(len(turns)), Label: "actor turns", Every: int64(max(1, len(turns)/10))})
	}
	rank, size := 0, ranks(o.Comm)
	if size > 1 {
		rank = o.Comm.Rank()
	}
	// Turn k's candidates are the sampler's (calls+k+1)-th draws, whichever
	// rank samples them.
	calls := pol.calls
	scored := make([]scoredTurn, len(turns))
	for k := rank; k < len(turns); k += size {
		tr := turns[k]
		t := trajs[tr.traj]
		prompt := withSystem(o.Protocol.System, sweetrl.TurnsToMessages(t.DialogueHistory[:tr.turn]))
		pol.calls = calls + uint64(k)
		outs, err := pol.Candidates(prompt, o.Candidates)
		if err != nil {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
		adv, polSum, err := critic.score(pol, o.Protocol.System, t.Task, t.DialogueHistory[:tr.turn], outs, o.BatchTokens)
		if err != nil {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
		scored[k] = scoredTurn{Outs: outs, Adv: adv, PolSum: polSum}
		if prog != nil {
			prog.Update(int64(k+1), math.NaN(), math.NaN(), math.NaN())
		}
	}
	pol.calls = calls + uint64(len(turns))
	if prog != nil {
		prog.Done()
	}
	if size > 1 {
		if err := gatherTurns(o.Comm, o.Backend, scored); err != nil {
			return nil, st, fmt.Errorf("actor data: gathering the ranks' candidates: %w", err)
		}
	}
	var pairs []PrefPair
	for _, sc := range scored {
		outs, adv, polSum := sc.Outs, sc.Adv, sc.PolSum
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, a := range adv {
			lo, hi = math.Min(lo, a), math.Max(hi, a)
		}
		st.MeanSpread += (hi - lo) / float64(len(turns))
		for _, p := range sweetrl.PairsByAdvantage(adv, o.PairsPerTurn, rng) {
			if outs[p.Chosen] == outs[p.Rejected] {
				st.TiedPairs++
				continue
			}
			pairs = append(pairs, PrefPair{Chosen: polSum[p.Chosen], Rejected: polSum[p.Rejected]})
		}
		st.Turns++
		st.Candidates += len(outs)
	}
	st.Pairs = len(pairs)
	return pairs, st, nil
}

// gatherTurns fills every rank's scored with the turns the other ranks of c
// sampled and scored (turn k on rank k mod W), through buffers of b.
func gatherTurns(c engine.Communicator, b engine.Backend, scored []scoredTurn) error {
	w, me := c.Size(), c.Rank()
	var mine struct{ Turns []scoredTurn } // a struct: gob encodes no top-level nil
	for k := me; k < len(scored); k += w {
		mine.Turns = append(mine.Turns, scored[k])
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(mine); err != nil {
		return err
	}
	all, err := engine.GatherBytes(c, b, buf.Bytes())
	if err != nil {
		return err
	}
	for r, raw := range all {
		var theirs struct{ Turns []scoredTurn }
		if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&theirs); err != nil {
			return fmt.Errorf("rank %d's turns: %w", r, err)
		}
		if want := (len(scored) - r + w - 1) / w; len(theirs.Turns) != want {
			return fmt.Errorf("rank %d sent %d turns, want %d", r, len(theirs.Turns), want)
		}
		for i, sc := range theirs.Turns {
			scored[r+i*w] = sc
		}
	}
	return nil
}
