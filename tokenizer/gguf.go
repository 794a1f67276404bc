package tokenizer

import (
	"errors"
	"fmt"
	"math"
)

// FromGGUFMetadata builds the tokenizer a GGUF model file describes in its
// tokenizer.ggml.* metadata, given as the file's key/value map (Go values as
// a GGUF reader returns them: string, uint32, []string, []float32,
// []int32, ...), so that this package needs no GGUF reader of its own.
//
// Model "llama" gives a SentencePiece tokenizer (tokens, scores, token_type,
// bos_token_id, eos_token_id, unknown_token_id, add_space_prefix); model
// "gpt2" with pre-tokenizer "llama-bpe" gives the Llama 3 byte-level BPE
// (tokens, token_type, merges), and the byte tokenizer's vocabulary as
// GGUFMetadata writes it (the 256 bytes, <bos> and <eos>, no merges) gives
// Bytes, whatever the pre-tokenizer. Other tokenizers are an error.
func FromGGUFMetadata(meta map[string]any) (Tokenizer, error) {
	m := ggufMeta(meta)
	model, err := metaGet[string](m, "tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	tokens, err := metaGet[[]string](m, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	types, err := metaGet[[]int32](m, "tokenizer.ggml.token_type")
	if err != nil && !errors.Is(err, errNoKey) {
		return nil, err
	}
	switch model {
	case "llama":
		scores, err := metaGet[[]float32](m, "tokenizer.ggml.scores")
		if err != nil {
			return nil, err
		}
		cfg := SentencePieceConfig{Tokens: tokens, Scores: scores, Types: types}
		if cfg.BOS, err = m.id("tokenizer.ggml.bos_token_id", 1); err != nil {
			return nil, err
		}
		if cfg.EOS, err = m.id("tokenizer.ggml.eos_token_id", 2); err != nil {
			return nil, err
		}
		if cfg.Unknown, err = m.id("tokenizer.ggml.unknown_token_id", 0); err != nil {
			return nil, err
		}
		if int(cfg.Unknown) >= len(tokens) {
			cfg.Unknown = -1
		}
		prefix, err := metaGet[bool](m, "tokenizer.ggml.add_space_prefix")
		switch {
		case err == nil:
			cfg.NoSpacePrefix = !prefix
		case !errors.Is(err, errNoKey):
			return nil, err
		}
		return NewSentencePiece(cfg)
	case "gpt2":
		merges, mergesErr := metaGet[[]string](m, "tokenizer.ggml.merges")
		if mergesErr == nil && isBytesGGUF(tokens, types, merges) {
			return Bytes{}, nil
		}
		pre, err := metaGet[string](m, "tokenizer.ggml.pre")
		if err != nil {
			return nil, err
		}
		if pre != "llama-bpe" {
			return nil, fmt.Errorf("tokenizer: GGUF pre-tokenizer %q is not supported (only llama-bpe, Llama 3's)", pre)
		}
		if mergesErr != nil {
			return nil, mergesErr
		}
		if types == nil {
			return nil, errors.New("tokenizer: GGUF metadata has no tokenizer.ggml.token_type, which a Llama 3 vocabulary needs to mark its special tokens")
		}
		return NewByteLevelBPE(tokens, types, merges)
	}
	return nil, fmt.Errorf("tokenizer: GGUF tokenizer model %q is not supported (want llama or gpt2)", model)
}

// ggufMeta is GGUF metadata as Go values.
type ggufMeta map[string]any

var errNoKey = errors.New("metadata key not found")

// metaGet returns the value of key as a T.
func metaGet[T any](m ggufMeta, key string) (T, error) {
	var zero T
	v, ok := m[key]
	if !ok {
		return zero, fmt.Errorf("tokenizer: GGUF metadata %q: %w", key, errNoKey)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("tokenizer: GGUF metadata %q is a %T, want %T", key, v, zero)
	}
	return t, nil
}

// id reads a token id stored as any integer type, or returns def when the
// key is absent. The value 2^32-1, how writers mark "none" in a uint32, and
// -1 come back as -1.
func (m ggufMeta) id(key string, def int32) (int32, error) {
	v, ok := m[key]
	if !ok {
		return def, nil
	}
	var n int64
	switch x := v.(type) {
	case uint8:
		n = int64(x)
	case int8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case int16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("tokenizer: GGUF metadata %q: token id %d out of range", key, x)
		}
		n = int64(x)
	default:
		return 0, fmt.Errorf("tokenizer: GGUF metadata %q is a %T, want an integer token id", key, v)
	}
	switch {
	case n == math.MaxUint32 || n == -1:
		return -1, nil
	case n < 0 || n > math.MaxInt32:
		return 0, fmt.Errorf("tokenizer: GGUF metadata %q: token id %d out of range", key, n)
	}
	return int32(n), nil
}
