package pipeline

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// ArithFile is where a demo run writes the values an independent
// implementation recomputes (scripts/sweetrl_check.py): a few of the
// critic's pairs, with their per-turn log-ratios, scores and losses and the
// gradient of their mean loss with respect to the critic's adapter; the
// critic's advantages on the critic check's decisions of a few held-out
// tasks; and a few of the actor's pairs, their losses and gradient. The
// gradients are in PEFT layout beside it (ArithCritic, ArithActor); the
// values are computed at the saved adapters' weights.
const ArithFile = "check/values.json"

// The gradients' directories, in PEFT layout (tensor names as the
// adapters').
const (
	ArithCriticGrad = "check/critic-grad"
	ArithActorGrad  = "check/actor-grad"
)

// ArithValues is the content of ArithFile.
type ArithValues struct {
	Family string `json:"family"`
	Model  string `json:"model"` // the base model's directory in the run
	// Critic holds the critic's pairs ("critic", the paper's or the
	// released code's score as Score says), Advantages its advantages, and
	// Actor the SWEET-RL actor's pairs ("actor"); each nil when the run
	// trained none.
	Critic     *ArithPrefs `json:"critic,omitempty"`
	Advantages []ArithCase `json:"advantages,omitempty"`
	Actor      *ArithPrefs `json:"actor,omitempty"`
}

// ArithPrefs are a preference adapter's checked values.
type ArithPrefs struct {
	Adapter string `json:"adapter"`         // its directory in the run
	Grad    string `json:"grad"`            // its gradient's directory in the run
	Score   string `json:"score,omitempty"` // the critic's score: turn or trajectory
	rl.ArithPrefs
}

// ArithCase is one decision of the critic check and its advantages.
type ArithCase struct {
	Name    string `json:"name"`
	Adapter string `json:"adapter"`
	rl.ArithAdvantage
}

// spread returns n items of s spread evenly over it (all of them when it
// has no more).
func spread[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	out := make([]T, n)
	for i := range out {
		out[i] = s[i*len(s)/n]
	}
	return out
}

// arithCritic records the critic's values: CheckValues of its training
// pairs, and its advantages on the check decisions of CheckValues held-out
// tasks.
func (r *runner) arithCritic(sp criticSpec, crit rl.Critic, pairs []rl.PrefPair, set Setting) error {
	o := r.prefOptions("", 1, 0, set.LR)
	o.Progress, o.Beta = nil, set.Beta
	v, err := rl.PrefArith(r.m, crit.Adapter, spread(pairs, r.c.CheckValues), o, func(g *llama.Adapter) error {
		return r.m.SavePEFT(g, filepath.Join(r.c.OutDir, ArithCriticGrad))
	})
	if err != nil {
		return fmt.Errorf("critic: %w", err)
	}
	r.arith.Critic = &ArithPrefs{Adapter: sp.key, Grad: ArithCriticGrad, Score: sp.score.String(), ArithPrefs: v}
	r.arith.Advantages = nil
	for _, t := range r.test[:min(len(r.test), r.c.CheckValues)] {
		cases, err := r.f.Checks(r.ctx, t)
		if err != nil {
			return err
		}
		for _, cc := range cases {
			a, err := crit.AdvantageArith(r.pol, r.f.Protocol.System, t, cc.Before, []string{cc.Better, cc.Worse}, batchTokens)
			if err != nil {
				return fmt.Errorf("critic, %s: %w", cc.Name, err)
			}
			r.arith.Advantages = append(r.arith.Advantages, ArithCase{Name: cc.Name, Adapter: sp.key, ArithAdvantage: a})
		}
	}
	return r.writeArith()
}

// arithActor records CheckValues of the actor's pairs (key names its
// adapter's directory).
func (r *runner) arithActor(key string, p *policy, pairs []rl.PrefPair) error {
	o := r.prefOptions("", rl.RefActorEpochs, rl.RefActorNLL, p.set.LR)
	o.Progress, o.Beta = nil, p.set.Beta
	v, err := rl.PrefArith(r.m, p.ad, spread(pairs, r.c.CheckValues), o, func(g *llama.Adapter) error {
		return r.m.SavePEFT(g, filepath.Join(r.c.OutDir, ArithActorGrad))
	})
	if err != nil {
		return fmt.Errorf("actor: %w", err)
	}
	r.arith.Actor = &ArithPrefs{Adapter: key, Grad: ArithActorGrad, ArithPrefs: v}
	return r.writeArith()
}

// writeArith writes ArithFile.
func (r *runner) writeArith() error {
	r.arith.Family, r.arith.Model = r.f.Name, "sft"
	js, err := json.Marshal(r.arith)
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(r.c.OutDir, ArithFile), append(js, '\n'), 0o644)
}
