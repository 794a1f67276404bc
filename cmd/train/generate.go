package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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
	idsArg := fs.String("ids", "", "prompt token ids, a JSON array or separated by spaces, instead of text")
	tokPath := fs.String("tokenizer", "", "tokenizer file (default: the model's own)")
	chat := fs.Bool("chat", false, "wrap the prompt as a user turn of the Llama 3.1 chat template")
	bosOnly := fs.Bool("bos-only", false, "start from the beginning-of-sequence token alone")
	maxNew := fs.Int("max-new", 128, "tokens to generate at most")
	temp := fs.Float32("temperature", 0, "sampling temperature (0: greedy)")
	topP := fs.Float32("top-p", 1, "nucleus sampling mass (1: off)")
	topK := fs.Int("top-k", 0, "sample among the k most likely tokens, before --top-p (0: off)")
	asJSON := fs.Bool("json", false, "print {text, ids, logprobs} as JSON instead of the text")
	if err := parse(fs, args); err != nil {
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
		var err error
		if ids, err = tokenizer.ParseIDs(*idsArg); err != nil {
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
		if ids, err = m.PromptIDs(tok, text, *chat); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return errors.New("empty prompt")
	}
	if *maxNew, err = m.Config.FitMaxNew(len(ids), *maxNew, stderr); err != nil {
		return err
	}
	stop := m.Config.EOS
	gen, err := m.Generate([][]int32{ids}, llama.GenerateOptions{MaxNew: *maxNew, Stop: stop, Seed: mf.seed, Adapter: ad,
		Sample: engine.SampleParams{Temperature: *temp, TopP: *topP, TopK: *topK}})
	if err != nil {
		return err
	}
	return llama.WriteGeneration(stdout, tok, ids, gen[0], *asJSON)
}

// runScore implements "train score": per-token log-probabilities of given
// sequences.
func runScore(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("score", stderr)
	var mf modelFlags
	mf.register(fs)
	input := fs.String("input", "", `JSONL file of sequences, one per line: {"ids": [...]} or {"text": "..."} (default: standard input)`)
	tokPath := fs.String("tokenizer", "", "tokenizer for text lines (default: the model's own)")
	if err := parse(fs, args); err != nil {
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
	return m.ScoreLines(r, name, tok, ad, stdout)
}
