package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// modelTokenizer finds the tokenizer of the model the flags name
// (llama.Source.Tokenizer), --tokenizer when given.
func modelTokenizer(mf *modelFlags, path string) (tokenizer.Tokenizer, error) {
	tok, err := mf.Tokenizer(path)
	if errors.Is(err, llama.ErrNoTokenizer) {
		return nil, errors.New("no tokenizer: pass --tokenizer PATH (or use --ids)")
	}
	return tok, err
}

// runGenerate implements "train generate": continue a prompt.
func runGenerate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("generate", stderr)
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("prompt", "", "prompt text (default: standard input, unless --ids or --bos-only)")
	idsArg := fs.String("ids", "", "prompt token ids as a JSON array, instead of text")
	tokPath := fs.String("tokenizer", "", "tokenizer file (default: the model's own)")
	chat := fs.Bool("chat", false, "wrap the prompt as a user turn of the Llama 3.1 chat template")
	bosOnly := fs.Bool("bos-only", false, "start from the beginning-of-sequence token alone")
	maxNew := fs.Int("max-new", 128, "tokens to generate at most")
	temp := fs.Float32("temperature", 0, "sampling temperature (0: greedy)")
	topP := fs.Float32("top-p", 1, "nucleus sampling mass (1: off)")
	asJSON := fs.Bool("json", false, "print {text, ids, logprobs} as JSON instead of the text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *maxNew <= 0 {
		return fmt.Errorf("--max-new %d: want a positive count", *maxNew)
	}
	m, ad, err := mf.load()
	if err != nil {
		return err
	}
	// The tokenizer is needed for text in or out; a run on --ids works
	// without one and prints ids.
	tok, _ := modelTokenizer(&mf, *tokPath)
	var ids []int32
	switch {
	case *bosOnly:
		ids = []int32{m.Config.BOS}
	case *idsArg != "":
		if err := json.Unmarshal([]byte(*idsArg), &ids); err != nil {
			return fmt.Errorf("--ids: %w", err)
		}
	default:
		text := *prompt
		if !fs.Changed("prompt") {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return fmt.Errorf("reading the prompt: %w", err)
			}
			text = string(data)
		}
		if tok == nil {
			return errors.New("no tokenizer for a text prompt: pass --tokenizer PATH, or --ids")
		}
		if *chat {
			ids, _, err = tokenizer.EncodeChat(tok, []tokenizer.Message{{Role: "user", Content: text}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
			if err != nil {
				return err
			}
		} else {
			ids = append([]int32{m.Config.BOS}, tok.Encode(text, tokenizer.EncodeOptions{})...)
		}
	}
	if len(ids) == 0 {
		return errors.New("empty prompt")
	}
	if *maxNew, err = fitMaxNew(m.Config, len(ids), *maxNew, stderr); err != nil {
		return err
	}
	stop := m.Config.EOS
	gen, err := m.Generate([][]int32{ids}, llama.GenerateOptions{MaxNew: *maxNew, Stop: stop, Seed: mf.seed, Adapter: ad,
		Sample: engine.SampleParams{Temperature: *temp, TopP: *topP}})
	if err != nil {
		return err
	}
	g := gen[0]
	text := ""
	if tok != nil {
		body := g.Tokens
		if g.Stopped {
			body = body[:len(body)-1]
		}
		if text, err = tok.Decode(body); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"text": text, "prompt_ids": ids, "ids": g.Tokens, "logprobs": g.LogProb, "stopped": g.Stopped})
	}
	if tok == nil {
		return json.NewEncoder(stdout).Encode(g.Tokens)
	}
	_, err = fmt.Fprintln(stdout, text)
	return err
}

// runScore implements "train score": per-token log-probabilities of given
// sequences.
func runScore(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("score", stderr)
	var mf modelFlags
	mf.register(fs)
	input := fs.String("input", "", `JSONL file of sequences, one per line: {"ids": [...]} or {"text": "..."} (default: standard input)`)
	tokPath := fs.String("tokenizer", "", "tokenizer for text lines (default: the model's own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, ad, err := mf.load()
	if err != nil {
		return err
	}
	tok, _ := modelTokenizer(&mf, *tokPath)
	r, name := stdin, "standard input"
	if *input != "" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, *input
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	enc := json.NewEncoder(stdout)
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec struct {
			IDs  []int32 `json:"ids"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, i+1, err)
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
		lp, err := scoreSequence(m, ad, ids)
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

// scoreSequence returns log π(ids[t] | ids[:t]) for t ≥ 1, under adapter ad
// (nil: the base model).
func scoreSequence(m *llama.Model, ad *llama.Adapter, ids []int32) ([]float32, error) {
	n := len(ids) - 1
	p, err := m.ForwardTrain(llama.Batch{IDs: ids[:n], Targets: ids[1:], Lens: []int{n}}, ad)
	if err != nil {
		return nil, err
	}
	defer p.Release()
	return engine.ToF32(m.Backend(), p.LogP), nil
}
