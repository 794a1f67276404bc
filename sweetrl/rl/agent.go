package rl

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// Sampler is an agent backed by a local model: each reply is sampled from
// the model (with its adapter) continuing the chat-formatted prompt, and
// ends at the tokenizer's end-of-turn or end-of-sequence token. It is not
// safe for concurrent use.
type Sampler struct {
	Model    *llama.Model
	Adapter  *llama.Adapter // nil: the base model
	Tok      tokenizer.Tokenizer
	Sample   engine.SampleParams // the reference samples at temperature 1
	MaxNew   int                 // tokens per reply at most (the reference: 1024)
	MaxBatch int                 // prompts generated together at most (0: all)
	Seed     uint64              // with the number of calls so far, seeds each batch's draws
	calls    uint64
}

// ActBatch returns a reply to each conversation: the exact prompt text each
// was given (inputs) and the text generated (outputs, without the stop
// token).
func (s *Sampler) ActBatch(ctx context.Context, convs [][]tokenizer.Message) (inputs, outputs []string, err error) {
	prompts := make([][]int32, len(convs))
	inputs = make([]string, len(convs))
	for i, msgs := range convs {
		if prompts[i], err = promptIDs(s.Tok, msgs); err != nil {
			return nil, nil, fmt.Errorf("conversation %d: %w", i, err)
		}
		if inputs[i], err = renderPrompt(s.Tok, msgs); err != nil {
			return nil, nil, fmt.Errorf("conversation %d: %w", i, err)
		}
	}
	outputs = make([]string, len(convs))
	step := s.MaxBatch
	if step <= 0 {
		step = len(convs)
	}
	for lo := 0; lo < len(prompts); lo += step {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		hi := min(lo+step, len(prompts))
		gens, err := s.Model.Generate(prompts[lo:hi], s.options())
		if err != nil {
			return nil, nil, err
		}
		for i, g := range gens {
			if outputs[lo+i], err = replyText(s.Tok, g); err != nil {
				return nil, nil, err
			}
		}
	}
	return inputs, outputs, nil
}

// Candidates samples n replies to one conversation from a shared prefix
// (best-of-N: the prompt is prefilled once), returning their texts.
func (s *Sampler) Candidates(msgs []tokenizer.Message, n int) ([]string, error) {
	prompt, err := promptIDs(s.Tok, msgs)
	if err != nil {
		return nil, err
	}
	gens, err := s.Model.GenerateN(prompt, n, s.options())
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i, g := range gens {
		if out[i], err = replyText(s.Tok, g); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Sampler) options() llama.GenerateOptions {
	s.calls++
	return llama.GenerateOptions{MaxNew: s.MaxNew, Sample: s.Sample, Seed: s.Seed ^ s.calls*0x9e3779b97f4a7c15,
		Stop: stopTokens(s.Tok), Adapter: s.Adapter}
}

// replyText decodes a generation without its stop token.
func replyText(tok tokenizer.Tokenizer, g llama.Generation) (string, error) {
	toks := g.Tokens
	if g.Stopped {
		toks = toks[:len(toks)-1]
	}
	if slices.ContainsFunc(toks, func(t int32) bool { return int(t) >= tok.VocabSize() }) {
		return "", fmt.Errorf("generated token outside the tokenizer's vocabulary of %d", tok.VocabSize())
	}
	return tok.Decode(toks)
}

// renderPrompt is the text of the prompt the agent continues, as stored in
// a trajectory's "input".
func renderPrompt(tok tokenizer.Tokenizer, msgs []tokenizer.Message) (string, error) {
	return tokenizer.RenderChatFor(tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
}

// ModelSimulator is a human simulator played by a local model: it is
// prompted with sweetrl.SimulatorMessages (the hidden information, then the
// dialogue with the roles swapped) and replies greedily, as the reference's
// simulator samples at temperature 0. It is safe for concurrent use (calls
// are serialised: the model is not).
type ModelSimulator struct {
	Model   *llama.Model
	Adapter *llama.Adapter // nil: the base model
	Tok     tokenizer.Tokenizer
	MaxNew  int // tokens per reply at most
	mu      sync.Mutex
}

// Respond implements sweetrl.Simulator.
func (s *ModelSimulator) Respond(ctx context.Context, task sweetrl.Task, history []tokenizer.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	prompt, err := promptIDs(s.Tok, sweetrl.SimulatorMessages(task, history))
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gens, err := s.Model.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: s.MaxNew, Stop: stopTokens(s.Tok), Adapter: s.Adapter})
	if err != nil {
		return "", err
	}
	return replyText(s.Tok, gens[0])
}
