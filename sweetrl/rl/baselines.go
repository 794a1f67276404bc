package rl

import (
	"fmt"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// RFTExamples is the rejection fine-tuning baseline's data: Examples of
// the successful trajectories (reward 1).
func RFTExamples(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]data.Example, error) {
	ex, _, err := Rules{}.RFTExamples(tok, system, trajs)
	return ex, err
}

// RFTExamples is the package's RFTExamples with the trajectories r
// imitates; it also says in words which they are.
func (r Rules) RFTExamples(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]data.Example, string, error) {
	kept, what := r.imitated(trajs)
	ex, err := Examples(tok, system, kept)
	return ex, what, err
}

// Examples turns trajectories into supervised examples in the agent's
// view — its system prompt and the dialogue — with the loss on every
// agent-turn token. Train on them with the supervised trainer.
func Examples(tok tokenizer.Tokenizer, system string, trajs []sweetrl.Trajectory) ([]data.Example, error) {
	var out []data.Example
	for i, t := range trajs {
		ids, mask, err := tokenizer.EncodeChat(tok, withSystem(system, sweetrl.TurnsToMessages(t.DialogueHistory)), tokenizer.ChatOptions{})
		if err != nil {
			return nil, fmt.Errorf("trajectory %d: %w", i, err)
		}
		out = append(out, data.Example{IDs: ids, Loss: mask})
	}
	return out, nil
}
