package llama

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/tokenizer"
)

// LogProbs returns log π(ids[t] | ids[:t]) for t ≥ 1, under adapter ad
// (nil: the base model): len(ids)-1 values.
func (m *Model) LogProbs(ids []int32, ad *Adapter) ([]float32, error) {
	n := len(ids) - 1
	p, err := m.ForwardTrain(Batch{IDs: ids[:n], Targets: ids[1:], Lens: []int{n}}, ad)
	if err != nil {
		return nil, err
	}
	defer p.Release()
	return engine.ToF32(m.Backend(), p.LogP), nil
}

// ScoreLines scores the sequences of r (named name in errors), JSONL with
// one per line, {"ids": [...]} or {"text": "..."} (encoded by tok after a
// BOS; nil tok: text lines are an error), under adapter ad. For each it
// writes one JSON line to w: the line's number, its ids, their
// log-probabilities (LogProbs), their sum and their mean.
func (m *Model) ScoreLines(r io.Reader, name string, tok tokenizer.Tokenizer, ad *Adapter, w io.Writer) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	enc := json.NewEncoder(w)
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec struct {
			IDs  []int32 `json:"ids"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, i+1, jsonerr.Reword(err))
		}
		ids := rec.IDs
		if rec.Text != nil {
			if tok == nil {
				return fmt.Errorf("%s:%d: a text line needs a tokenizer (--tokenizer PATH)", name, i+1)
			}
			ids = append([]int32{m.Config.BOS}, tok.Encode(*rec.Text, tokenizer.EncodeOptions{})...)
		}
		if len(ids) < 2 {
			return fmt.Errorf("%s:%d: a sequence needs at least two tokens to score", name, i+1)
		}
		lp, err := m.LogProbs(ids, ad)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		var sum float64
		for _, v := range lp {
			sum += float64(v)
		}
		if err := enc.Encode(map[string]any{"line": i + 1, "ids": ids, "logprobs": lp, "sum": sum, "mean": sum / float64(len(lp))}); err != nil {
			return err
		}
	}
	return nil
}

// PromptIDs encodes a text prompt with tok: as the user turn of a chat
// ending in the assistant's header (chat), or as BOS and the text.
func (m *Model) PromptIDs(tok tokenizer.Tokenizer, text string, chat bool) ([]int32, error) {
	if chat {
		ids, _, err := tokenizer.EncodeChat(tok, []tokenizer.Message{{Role: "user", Content: text}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
		return ids, err
	}
	return append([]int32{m.Config.BOS}, tok.Encode(text, tokenizer.EncodeOptions{})...), nil
}

// WriteGeneration writes g, the continuation of prompt: with asJSON one
// JSON object {text, prompt_ids, ids, logprobs, stopped}; otherwise the
// text decoded by tok without its stop token and a newline, or, with no
// tokenizer (nil tok), the ids as a JSON array. The text is decoded as the
// prompt's continuation (tokenizer.DecodeContinuation): its leading space
// is kept.
func WriteGeneration(w io.Writer, tok tokenizer.Tokenizer, prompt []int32, g Generation, asJSON bool) error {
	text := ""
	if tok != nil {
		body := g.Tokens
		if g.Stopped {
			body = body[:len(body)-1]
		}
		var err error
		if text, err = tokenizer.DecodeContinuation(tok, prompt, body, false); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"text": text, "prompt_ids": prompt, "ids": g.Tokens, "logprobs": g.LogProb, "stopped": g.Stopped})
	}
	if tok == nil {
		return json.NewEncoder(w).Encode(g.Tokens)
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

// Greedy returns the text of the greedy continuation of prompt by the model
// with adapter ad (nil: none): up to maxNew tokens, or to an end token.
func (m *Model) Greedy(tok tokenizer.Tokenizer, prompt []int32, maxNew int, ad *Adapter) (string, error) {
	gen, err := m.Generate([][]int32{prompt}, GenerateOptions{MaxNew: maxNew, Stop: m.Config.EOS, Adapter: ad})
	if err != nil {
		return "", err
	}
	return tokenizer.DecodeContinuation(tok, prompt, gen[0].Tokens, false)
}
