package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// NewLoRA adds a fresh LoRA adapter of rank r (alpha 2r) on every
// projection.
func NewLoRA(m *llama.Model, r int, seed uint64) (*llama.Adapter, error) {
	return m.NewAdapter(llama.LoRAConfig{Rank: r, Alpha: 2 * float32(r), Targets: llama.AllProjections}, seed)
}

// SFTOptions control SupervisedFT.
type SFTOptions struct {
	Steps, BatchTokens, MaxLen int
	LR                         float64
	Seed                       uint64
}

// SupervisedFT trains m's adapter ad (nil: every weight) on examples with
// the supervised trainer: AdamW (0.9, 0.95), 3% warm-up then cosine to
// 0.1·LR, clipping at 1, no checkpoints. out gets the progress lines (nil:
// none).
func SupervisedFT(m *llama.Model, ad *llama.Adapter, examples []data.Example, o SFTOptions, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	if len(examples) == 0 {
		return errors.New("no training examples")
	}
	train, err := data.NewPacker(examples, data.PackOptions{TokensPerBatch: o.BatchTokens, MaxLen: o.MaxLen, Seed: o.Seed})
	if err != nil {
		return err
	}
	tr, err := trainer.New(m, ad, train, nil, trainer.Config{
		Steps: o.Steps, MicroBatches: 1,
		Schedule: optim.Schedule{Peak: o.LR, Warmup: max(1, o.Steps*3/100), Total: o.Steps, Cosine: true, MinRatio: rl.RefMinLRRatio},
		AdamW:    optim.AdamWConfig{Beta1: rl.RefAdamBeta1, Beta2: rl.RefAdamBeta2, Eps: rl.RefAdamEps, MaxGradNorm: rl.RefMaxGradNorm},
	}, out)
	if err != nil {
		return err
	}
	return tr.Run()
}

// EvalOptions control Evaluate.
type EvalOptions struct {
	Seeds       int     // episodes per task, each with its own sampling seed
	Temperature float64 // of the agent's sampling
	MaxNew      int     // tokens per agent turn
	Seed        uint64
	SimWorkers  int
	Label       string
}

// Evaluate plays Seeds episodes of every task with the agent m + ad against
// sim, scores them, and summarises pass rate and success with 95%
// confidence intervals over tasks.
func Evaluate(ctx context.Context, m *llama.Model, ad *llama.Adapter, tok tokenizer.Tokenizer, proto sweetrl.Protocol,
	tasks []sweetrl.Task, sim sweetrl.Simulator, scorer sweetrl.Scorer, o EvalOptions, out io.Writer) (rl.Summary, []sweetrl.Trajectory, error) {
	var all []sweetrl.Trajectory
	var ids []int
	var scores []sweetrl.Score
	for s := 0; s < max(o.Seeds, 1); s++ {
		agent := &rl.Sampler{Model: m, Adapter: ad, Tok: tok, MaxNew: o.MaxNew, Seed: o.Seed + uint64(s)*1000003,
			Sample: engine.SampleParams{Temperature: float32(o.Temperature), TopP: 1}}
		trajs, err := rl.RunEpisodes(ctx, tasks, agent, sim, rl.RolloutOptions{Protocol: proto, SimWorkers: o.SimWorkers,
			Progress: out, Label: fmt.Sprintf("%s episodes (seed %d/%d)", o.Label, s+1, max(o.Seeds, 1))})
		if err != nil {
			return rl.Summary{}, nil, err
		}
		sc, err := rl.Score(ctx, scorer, trajs)
		if err != nil {
			return rl.Summary{}, nil, err
		}
		for i := range trajs {
			ids = append(ids, i)
		}
		all, scores = append(all, trajs...), append(scores, sc...)
	}
	return rl.Summarize(ids, scores), all, nil
}

// Health describes how a policy's episodes look, beyond their reward: the
// signs of over-optimisation.
type Health struct {
	// Degenerate is the fraction of episodes with an agent reply that is
	// not text: invalid UTF-8, or control characters other than newline
	// and tab (the byte noise of a policy pushed far from its reference).
	Degenerate float64
	// NoAnswer is the fraction of episodes that ended at the turn limit
	// without the answer marker.
	NoAnswer float64
	// MeanTurns is the mean number of agent turns per episode.
	MeanTurns float64
}

// EpisodeHealth computes the Health of episodes.
func EpisodeHealth(eps []sweetrl.Trajectory) Health {
	var h Health
	if len(eps) == 0 {
		return h
	}
	for _, e := range eps {
		bad, answered, turns := false, false, 0
		for _, t := range e.DialogueHistory {
			if t.Role != sweetrl.RoleAssistant {
				continue
			}
			turns++
			out := t.Output
			if out == "" {
				out = t.Content
			}
			if !isText(out) {
				bad = true
			}
			if strings.Contains(t.Content, sweetrl.AnswerMarker) {
				answered = true
			}
		}
		if bad {
			h.Degenerate++
		}
		if !answered {
			h.NoAnswer++
		}
		h.MeanTurns += float64(turns)
	}
	n := float64(len(eps))
	h.Degenerate /= n
	h.NoAnswer /= n
	h.MeanTurns /= n
	return h
}

// isText reports whether s is valid UTF-8 with no control character other
// than newline and tab.
func isText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			return false
		}
	}
	return true
}

// timeSince is time.Since, named for the pipeline's clock.
func timeSince(t time.Time) time.Duration { return time.Since(t) }
