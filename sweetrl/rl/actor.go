package rl

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// Critic is a trained SWEET-RL critic: a model and its adapter (nil: the
// model's own weights) that scores an agent turn by its mean
// log-probability after the ground truth and the dialogue — or, with Head
// set, the value-head ablation, which scores it by the value of the
// dialogue ending with it.
type Critic struct {
	Model   *llama.Model
	Adapter *llama.Adapter
	Head    *ValueHead // nil: the log-probability critic
	// Baseline is what a candidate's critic score is compared with when
	// candidates are ranked (see AdvantageBaseline).
	Baseline AdvantageBaseline
	// RefModel and RefAdapter are the critic's frozen reference, for
	// BaselineReference; a nil RefModel means Model without the adapter
	// (the base a LoRA critic was trained over).
	RefModel   *llama.Model
	RefAdapter *llama.Adapter
}

// AdvantageBaseline is what a log-probability critic's score of a candidate
// turn is compared with when candidates are ranked.
type AdvantageBaseline int

const (
	// BaselineReference is the paper's (Eq. 3): the critic's frozen
	// reference, which also sees the ground truth, so that the advantage is
	// the turn's mean log-ratio A(o_t, a_t, c).
	BaselineReference AdvantageBaseline = iota
	// BaselinePolicy is the released code's (scripts/rank_best_of_n.py):
	// the sampling policy's mean log-probability of the candidate, without
	// the ground truth.
	BaselinePolicy
)

// String returns the flag value of b: "reference" or "policy".
func (b AdvantageBaseline) String() string {
	if b == BaselinePolicy {
		return "policy"
	}
	return "reference"
}

// ParseAdvantageBaseline parses "reference" (the paper's) or "policy" (the
// released code's).
func ParseAdvantageBaseline(v string) (AdvantageBaseline, error) {
	switch v {
	case "reference":
		return BaselineReference, nil
	case "policy":
		return BaselinePolicy, nil
	}
	return 0, fmt.Errorf("advantage baseline %q: want reference (the paper's) or policy (the released code's)", v)
}

// ActorOptions control ActorPairs.
type ActorOptions struct {
	Protocol     sweetrl.Protocol // the agent's system prompt
	Candidates   int              // N, candidates sampled per turn (16)
	PairsPerTurn int              // pairs formed per turn (4)
	DataFraction float64          // fraction of the agent turns used (0.1 in the reference)
	BatchTokens  int              // tokens per scoring pass
	Seed         uint64           // picks the turns and the pairs
	Progress     io.Writer        // a progress line counting turns (nil: none)
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
	var pairs []PrefPair
	for k, tr := range turns {
		t := trajs[tr.traj]
		prompt := withSystem(o.Protocol.System, sweetrl.TurnsToMessages(t.DialogueHistory[:tr.turn]))
		outs, err := pol.Candidates(prompt, o.Candidates)
		if err != nil {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
		adv, polSum, err := critic.score(pol, o.Protocol.System, t.Task, t.DialogueHistory[:tr.turn], outs, o.BatchTokens)
		if err != nil {
			return nil, st, fmt.Errorf("trajectory %d, turn %d: %w", tr.traj, tr.turn, err)
		}
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
		if prog != nil {
			prog.Update(int64(k+1), math.NaN(), math.NaN(), math.NaN())
		}
	}
	if prog != nil {
		prog.Done()
	}
	st.Pairs = len(pairs)
	return pairs, st, nil
}

// Advantages returns the critic's advantage of each candidate reply to the
// dialogue before (an episode of task up to, not including, an agent turn),
// as ActorPairs ranks candidates:
//
//	BaselineReference: A(a) = mean log π_critic(a | c, o) − mean log π_ref(a | c, o)
//	BaselinePolicy:    A(a) = mean log π_critic(a | c, o) − mean log π_policy(a | o)
//
// where c is the ground truth, o the agent's system prompt and the dialogue,
// and a the raw reply (its hidden thought included, as the reference's
// critic reads a turn's "output"); or, with a value head, the value of the
// dialogue ending with the reply.
func (c Critic) Advantages(pol *Sampler, system string, task sweetrl.Task, before []sweetrl.Turn, cands []string, batchTokens int) ([]float64, error) {
	adv, _, err := c.score(pol, system, task, before, cands, batchTokens)
	return adv, err
}

// score returns the candidates' advantages and their policy-view sequences
// weighted by the summed log-probability of the reply's tokens.
func (c Critic) score(pol *Sampler, system string, task sweetrl.Task, before []sweetrl.Turn, cands []string, batchTokens int) (adv []float64, polSum []Seq, err error) {
	prompt := withSystem(system, sweetrl.TurnsToMessages(before))
	prefix := criticPrefix(pol.Tok, task.GroundTruth)
	var critSeqs, polMean []Seq
	for _, out := range cands {
		cs, err := lastTurnSeq(pol.Tok, prefix, append(prompt[:len(prompt):len(prompt)], tokenizer.Message{Role: sweetrl.RoleAssistant, Content: out}), mean)
		if err != nil {
			return nil, nil, err
		}
		ps, err := lastTurnSeq(pol.Tok, nil, append(prompt[:len(prompt):len(prompt)], tokenizer.Message{Role: sweetrl.RoleAssistant, Content: out}), sum)
		if err != nil {
			return nil, nil, err
		}
		critSeqs, polSum = append(critSeqs, cs), append(polSum, ps)
		polMean = append(polMean, Seq{IDs: ps.IDs, W: meanOf(ps.W)})
	}
	adv, err = c.advantages(pol, critSeqs, polMean, batchTokens)
	return adv, polSum, err
}

// advantages scores candidates: the critic's mean log-probability of each
// (critSeqs) minus its baseline's — the reference's of critSeqs, or the
// policy's of polMean — or the value head's value.
func (c Critic) advantages(pol *Sampler, critSeqs, polMean []Seq, batchTokens int) ([]float64, error) {
	if c.Head != nil {
		return c.Head.Values(c.Model, c.Adapter, critSeqs, batchTokens)
	}
	crit, err := Scores(c.Model, c.Adapter, critSeqs, batchTokens)
	if err != nil {
		return nil, err
	}
	var own []float64
	switch c.Baseline {
	case BaselinePolicy:
		own, err = Scores(pol.Model, pol.Adapter, polMean, batchTokens)
	default:
		rm, ra, rerr := c.reference()
		if rerr != nil {
			return nil, rerr
		}
		own, err = Scores(rm, ra, critSeqs, batchTokens)
	}
	if err != nil {
		return nil, err
	}
	adv := make([]float64, len(crit))
	for i := range adv {
		adv[i] = sweetrl.TurnAdvantage(crit[i], own[i])
	}
	return adv, nil
}

// reference returns the critic's frozen reference.
func (c Critic) reference() (*llama.Model, *llama.Adapter, error) {
	switch {
	case c.RefModel != nil:
		return c.RefModel, c.RefAdapter, nil
	case c.Adapter != nil:
		return c.Model, nil, nil
	}
	return nil, nil, errors.New("the reference advantage baseline needs the critic's frozen reference: a LoRA critic, or RefModel")
}

// meanOf turns weights of 1 on some tokens into 1/n on them.
func meanOf(w []float32) []float32 {
	mask := make([]bool, len(w))
	for i, v := range w {
		mask[i] = v != 0
	}
	out, _ := weightsOver(mask, mean)
	return out
}
