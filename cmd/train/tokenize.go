package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// runTokenize implements "train tokenize".
func runTokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", stderr)
	tokPath := fs.String("tokenizer", "", "tokenizer.json, tokenizer.model or .gguf file (required)")
	text := fs.String("text", "", "text to encode, or the conversation for --chat (default: standard input)")
	decode := fs.Bool("decode", false, "decode token ids to text")
	idsArg := fs.String("ids", "", "ids for --decode: a JSON array or whitespace-separated numbers (default: standard input)")
	chat := fs.Bool("chat", false, `render a JSON conversation, [{"role": ..., "content": ...}, ...] or {"messages": [...]}`)
	allowSpecial := fs.Bool("allow-special", false, "encode special-token text such as <|eot_id|> as the special token")
	bos := fs.Bool("bos", false, "prepend the beginning-of-sequence token when encoding")
	skipSpecial := fs.Bool("skip-special", false, "leave special tokens out when decoding")
	genPrompt := fs.Bool("add-generation-prompt", false, "end a --chat rendering with an empty assistant header")
	date := fs.String("date", "", `"Today Date" of a --chat rendering (default "`+tokenizer.DefaultChatDate+`")`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *decode && *chat {
		return errors.New("--decode and --chat cannot be combined")
	}
	if *tokPath == "" {
		return errors.New("no tokenizer: pass --tokenizer PATH (a tokenizer.json, a tokenizer.model or a .gguf file)")
	}
	tok, err := llama.LoadTokenizer(*tokPath)
	if err != nil {
		return err
	}
	input := func(flagName string, value string) (string, error) {
		if fs.Changed(flagName) {
			return value, nil
		}
		data, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("reading standard input: %w", err)
		}
		return string(data), nil
	}

	switch {
	case *decode:
		in, err := input("ids", *idsArg)
		if err != nil {
			return err
		}
		ids, err := tokenizer.ParseIDs(in)
		if err != nil {
			return err
		}
		out, err := tokenizer.DecodeStream(tok, ids, *skipSpecial)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, out)
		return err

	case *chat:
		in, err := input("text", *text)
		if err != nil {
			return err
		}
		msgs, err := tokenizer.ParseConversation([]byte(in))
		if err != nil {
			return err
		}
		r, err := tokenizer.RenderChatIDs(tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: *genPrompt, Date: *date})
		if err != nil {
			return err
		}
		return writeJSON(stdout, r)

	default:
		in, err := input("text", *text)
		if err != nil {
			return err
		}
		ids := tok.Encode(in, tokenizer.EncodeOptions{AllowSpecial: *allowSpecial, AddBOS: *bos})
		if ids == nil {
			ids = []int32{}
		}
		return writeJSON(stdout, ids)
	}
}

// writeJSON writes v as one line of JSON, without escaping <, > and &
// (special tokens are full of them).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
