package rl

import (
	"errors"
	"fmt"
	"io"

	"github.com/turnwise/turnwise/model/llama"
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
	// WithoutInfo reads the dialogue without the training-time information
	// (no "In light that the final answer is: …" before it): the paper's
	// ablation, trained on CriticPairsWithoutInfo.
	WithoutInfo bool
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

// LoadCritic loads the critic an actor is trained with, over the policy's
// base model m: a PEFT adapter directory on m (adapterDir), or else a whole
// checkpoint in hfDir, which loadHF loads. The base with the policy's
// adapter ad (nil: none) is its frozen reference; baseline is how its
// advantages are taken. A scalar value head saved beside it is loaded too,
// and said on log.
func LoadCritic(m *llama.Model, ad *llama.Adapter, adapterDir, hfDir string, baseline AdvantageBaseline,
	loadHF func() (*llama.Model, error), log io.Writer) (Critic, error) {
	c := Critic{Model: m, Baseline: baseline, RefModel: m, RefAdapter: ad}
	dir := adapterDir
	var err error
	if adapterDir != "" {
		if c.Adapter, err = m.LoadPEFT(adapterDir); err != nil {
			return Critic{}, err
		}
	} else {
		dir = hfDir
		if c.Model, err = loadHF(); err != nil {
			return Critic{}, fmt.Errorf("critic: %w", err)
		}
	}
	hp, err := c.LoadHead(dir)
	if err != nil {
		return Critic{}, err
	}
	if hp != "" {
		fmt.Fprintf(log, "the critic has a scalar value head (%s): candidates are ranked by its value\n", hp)
	}
	return c, nil
}

// ParseNLLScope parses the scope of the actor's NLL term: "sequence" (the
// reference's: the whole chosen sequence, context included; true) or
// "reply" (false).
func ParseNLLScope(v string) (bool, error) {
	switch v {
	case "sequence":
		return true, nil
	case "reply":
		return false, nil
	}
	return false, fmt.Errorf("--nll-scope %q: want sequence (the reference's) or reply", v)
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
	if c.WithoutInfo {
		prefix = nil
	}
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
	return Rules{}.CriticPairs(tok, system, trajs, kind)
}

// CriticPairsWithoutInfo forms CriticPairs' pairs with each side read
// without the training-time information (the ground truth): the paper's
// ablation of it (a Critic with WithoutInfo).
func (r Rules) CriticPairsWithoutInfo(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory, kind CriticScore) ([]PrefPair, error) {
	return seqPairs(trajs, r.pairs(trajs), func(t sweetrl.Trajectory) (Seq, error) {
		return dialogueSeq(tok, nil, criticMessages(system, t.DialogueHistory), mean, kind == ScoreTurn)
	})
}

// TrajectoryPairs forms the multi-turn DPO baseline's pairs: the same
// trajectory pairs as the critic's, each side the agent's view (its system
// prompt and the dialogue, no ground truth) scored by the summed
// log-probability of every agent-turn token.
func TrajectoryPairs(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]PrefPair, error) {
	return Rules{}.TrajectoryPairs(tok, system, trajs)
}

// Rules are what a task family decides in training besides its episodes:
// which trajectory pairs the critic and multi-turn DPO train on, and which
// trajectories rejection fine-tuning imitates. The zero value is the
// reference's rules for backend tasks.
type Rules struct {
	// Pairs forms the trajectory pairs of scored trajectories, as indices
	// into them; nil: each task's first attempt with reward 1 against
	// every attempt with a lower reward (sweetrl.PairsByReward).
	Pairs func(trajs []sweetrl.Trajectory) []sweetrl.Pair
	// Imitate picks the trajectories rejection fine-tuning trains on, as
	// indices into trajs; nil: those with reward 1.
	Imitate func(trajs []sweetrl.Trajectory) []int
	// Imitated says in words which trajectories Imitate picks ("": the
	// successful ones, reward 1).
	Imitated string
}

// pairs returns the trajectory pairs of trajs under r.
func (r Rules) pairs(trajs []sweetrl.Trajectory) []sweetrl.Pair {
	if r.Pairs != nil {
		return r.Pairs(trajs)
	}
	return taskPairs(trajs)
}

// imitated returns the trajectories rejection fine-tuning trains on under
// r, and says in words which they are.
func (r Rules) imitated(trajs []sweetrl.Trajectory) ([]sweetrl.Trajectory, string) {
	var out []sweetrl.Trajectory
	if r.Imitate == nil {
		for _, t := range trajs {
			if t.Reward == 1 {
				out = append(out, t)
			}
		}
		return out, "successful trajectories (reward 1)"
	}
	for _, i := range r.Imitate(trajs) {
		out = append(out, trajs[i])
	}
	return out, r.Imitated
}

// CriticPairs is the package's CriticPairs with r's pairs.
func (r Rules) CriticPairs(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory, kind CriticScore) ([]PrefPair, error) {
	return seqPairs(trajs, r.pairs(trajs), func(t sweetrl.Trajectory) (Seq, error) { return CriticSeq(tok, system, t, kind) })
}

// TrajectoryPairs is the package's TrajectoryPairs with r's pairs.
func (r Rules) TrajectoryPairs(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]PrefPair, error) {
	return seqPairs(trajs, r.pairs(trajs), func(t sweetrl.Trajectory) (Seq, error) { return PolicySeq(tok, system, t) })
}

// seqPairs turns pairs of indices into trajs into pairs of their views.
func seqPairs(trajs []sweetrl.Trajectory, pairs []sweetrl.Pair, view func(sweetrl.Trajectory) (Seq, error)) ([]PrefPair, error) {
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
	for _, p := range pairs {
		if p.Chosen < 0 || p.Chosen >= len(trajs) || p.Rejected < 0 || p.Rejected >= len(trajs) {
			panic(fmt.Sprintf("rl: pair %+v of %d trajectories", p, len(trajs)))
		}
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
