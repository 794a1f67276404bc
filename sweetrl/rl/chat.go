package rl

import (
	"fmt"
	"slices"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// The token sequences of this package are chat-formatted dialogues
// (tokenizer.EncodeChat: the Llama 3.1 format, or the compact byte format
// for models trained from scratch). The agent sees its system prompt and
// the dialogue; the critic sees the training-time information, then what
// the agent saw — its system prompt and the dialogue — and the agent's raw
// reply, as the reference's critic text is the prefix, the turn's templated
// "input" and its "output".

// promptIDs encodes msgs followed by an assistant header: the prompt the
// agent continues.
func promptIDs(tok tokenizer.Tokenizer, msgs []tokenizer.Message) ([]int32, error) {
	ids, _, err := tokenizer.EncodeChat(tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	return ids, err
}

// withSystem puts the system prompt (if any) before the dialogue.
func withSystem(system string, msgs []tokenizer.Message) []tokenizer.Message {
	if system == "" {
		return msgs
	}
	return append([]tokenizer.Message{{Role: "system", Content: system}}, msgs...)
}

// weightsOver returns weights [len(mask)] of w on the tokens where mask is
// true, zero elsewhere, and the number of such tokens.
func weightsOver(mask []bool, w func(n int) float32) ([]float32, int) {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	out := make([]float32, len(mask))
	if n == 0 {
		return out, 0
	}
	v := w(n)
	for i, m := range mask {
		if m {
			out[i] = v
		}
	}
	return out, n
}

func mean(n int) float32 { return 1 / float32(n) }
func sum(int) float32    { return 1 }

// perTurnMean returns weights [len(mask)] of 1/L_t on the tokens of each
// run of true in mask (an agent turn of L_t tokens), zero elsewhere, and
// the number of runs: the weights of Σ_t mean_t, the paper's score.
func perTurnMean(mask []bool) ([]float32, int) {
	out := make([]float32, len(mask))
	turns := 0
	for i := 0; i < len(mask); {
		if !mask[i] {
			i++
			continue
		}
		j := i
		for j < len(mask) && mask[j] {
			j++
		}
		for k := i; k < j; k++ {
			out[k] = 1 / float32(j-i)
		}
		turns++
		i = j
	}
	return out, turns
}

// dialogueSeq encodes msgs (with prefix ids before them) and weighs the
// assistant tokens (each agent turn's body through its end-of-turn token):
// by w(n), n being their count, or, with perTurn, by 1/L_t within each
// agent turn of L_t tokens.
func dialogueSeq(tok tokenizer.Tokenizer, prefix []int32, msgs []tokenizer.Message, w func(int) float32, perTurn bool) (Seq, error) {
	ids, mask, err := tokenizer.EncodeChat(tok, msgs, tokenizer.ChatOptions{})
	if err != nil {
		return Seq{}, err
	}
	ids = append(slices.Clip(prefix), ids...)
	mask = append(make([]bool, len(prefix)), mask...)
	var weights []float32
	var n int
	if perTurn {
		weights, n = perTurnMean(mask)
	} else {
		weights, n = weightsOver(mask, w)
	}
	if n == 0 {
		return Seq{}, fmt.Errorf("the dialogue has no agent turn")
	}
	return Seq{IDs: ids, W: weights}, nil
}

// lastTurnSeq encodes msgs, whose last message is the assistant's, and
// weighs that message's tokens alone by w(n). prefix ids go before.
func lastTurnSeq(tok tokenizer.Tokenizer, prefix []int32, msgs []tokenizer.Message, w func(int) float32) (Seq, error) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != sweetrl.RoleAssistant {
		panic("rl: lastTurnSeq needs a dialogue ending with an assistant message")
	}
	ctx, err := promptIDs(tok, msgs[:len(msgs)-1])
	if err != nil {
		return Seq{}, err
	}
	ids, mask, err := tokenizer.EncodeChat(tok, msgs, tokenizer.ChatOptions{})
	if err != nil {
		return Seq{}, err
	}
	if len(ids) <= len(ctx) || !slices.Equal(ids[:len(ctx)], ctx) {
		return Seq{}, fmt.Errorf("the chat format does not encode the turn after its prompt")
	}
	for i := range len(ctx) {
		mask[i] = false
	}
	ids = append(slices.Clip(prefix), ids...)
	mask = append(make([]bool, len(prefix)), mask...)
	weights, n := weightsOver(mask, w)
	if n == 0 {
		return Seq{}, fmt.Errorf("the agent turn is empty")
	}
	return Seq{IDs: ids, W: weights}, nil
}

// criticPrefix returns the ids of the critic's training-time information.
// No beginning-of-sequence token goes before it: the reference's critic
// text is the prefix followed by the chat-templated prompt (which begins
// with its own beginning-of-text token), tokenized without special tokens
// added.
func criticPrefix(tok tokenizer.Tokenizer, groundTruth string) []int32 {
	return tok.Encode(sweetrl.CriticPrefix(groundTruth), tokenizer.EncodeOptions{})
}

// criticMessages is the dialogue as the critic reads it: the agent's system
// prompt, then every turn's visible content, except that the last agent
// turn is its raw output (the reference's critic text is that turn's
// "input", where earlier turns are visible content, then its "output").
func criticMessages(system string, turns []sweetrl.Turn) []tokenizer.Message {
	msgs := sweetrl.TurnsToMessages(turns)
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == sweetrl.RoleAssistant {
			if turns[i].Output != "" {
				msgs[i].Content = turns[i].Output
			}
			break
		}
	}
	return withSystem(system, msgs)
}

// CriticSeq is the critic's view of a trajectory: the training-time
// information (the task's ground truth), then the agent's system prompt and
// the chat-formatted dialogue (criticMessages), weighted for the score
// kind: the sum over agent turns of each turn's mean log-probability
// (ScoreTurn), or one mean over every agent-turn token (ScoreTrajectory).
func CriticSeq(tok tokenizer.Tokenizer, system string, tr sweetrl.Trajectory, kind CriticScore) (Seq, error) {
	return dialogueSeq(tok, criticPrefix(tok, tr.Task.GroundTruth), criticMessages(system, tr.DialogueHistory), mean, kind == ScoreTurn)
}

// PolicySeq is the agent's view of a whole trajectory: its system prompt
// then the dialogue, scored by the summed log-probability of every
// agent-turn token (the multi-turn DPO baseline's score).
func PolicySeq(tok tokenizer.Tokenizer, system string, tr sweetrl.Trajectory) (Seq, error) {
	return dialogueSeq(tok, nil, withSystem(system, sweetrl.TurnsToMessages(tr.DialogueHistory)), sum, false)
}

// stopTokens are the tokens that end an agent's or simulator's turn.
func stopTokens(tok tokenizer.Tokenizer) []int32 {
	s := tok.EOS()
	if e := tok.EOT(); !slices.Contains(s, e) {
		s = append(s, e)
	}
	return s
}
