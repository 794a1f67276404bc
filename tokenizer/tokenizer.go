// Package tokenizer turns text into token ids and back for the models
// turnwise trains, and renders conversations in their chat format.
//
// Three tokenizers implement the Tokenizer interface:
//
//   - BPE, the byte-level BPE of Llama 3 (and 3.1), loaded from a Hugging
//     Face tokenizer.json (LoadJSON, ParseJSON), from Meta's tokenizer.model
//     (LoadTiktoken, ParseTiktoken), or from the arrays a GGUF file stores
//     (NewByteLevelBPE). Its pre-tokenizer is the Llama 3 split pattern,
//     written by hand.
//   - SentencePiece, the score-driven BPE of Llama 2 era models such as the
//     tinyllamas checkpoints, built from the token, score and type arrays of
//     a GGUF file (NewSentencePiece), or read from a Hugging Face
//     tokenizer.json in the form Hugging Face's converter gives Llama's
//     (LoadFile).
//   - Bytes, one token per byte plus BOS and EOS, for models trained from
//     scratch without tokenizer files.
//
// FromGGUFMetadata picks and builds either from a GGUF file's metadata map.
//
// RenderChat and EncodeChat render the Llama 3.1 chat template and compute
// the mask of assistant tokens that training needs; for Bytes, EncodeChat
// (and RenderByteChat) use a compact byte chat format instead.
//
// Special tokens (such as "<|eot_id|>") are recognised in text only when
// EncodeOptions.AllowSpecial is set; otherwise their text is encoded like any
// other text, so that user content cannot forge control tokens.
package tokenizer

import "unicode/utf8"

// Tokenizer is what the rest of turnwise needs from a tokenizer.
// Implementations are safe for concurrent use.
type Tokenizer interface {
	// Encode returns the token ids of text.
	Encode(text string, opts EncodeOptions) []int32
	// Decode returns the text of ids. Special tokens decode to their text.
	// An id outside the vocabulary is an error.
	Decode(ids []int32) (string, error)
	// AppendDecoded appends to dst the bytes token id contributes to
	// decoded text when it follows token prev (prev is -1 at the start of a
	// sequence). Decoding is not purely per token: SentencePiece drops the
	// leading space of the first token.
	AppendDecoded(dst []byte, prev, id int32) ([]byte, error)
	// VocabSize returns the number of token ids, special tokens included.
	VocabSize() int
	// BOS returns the id of the beginning-of-sequence token.
	BOS() int32
	// EOT returns the id of the token that ends a chat turn (for
	// tokenizers without one, the end-of-sequence token).
	EOT() int32
	// IsEOS reports whether generation should stop at id.
	IsEOS(id int32) bool
	// EOS returns the ids at which generation stops.
	EOS() []int32
	// IsSpecial reports whether id is a special (control) token.
	IsSpecial(id int32) bool
	// SpecialID returns the id of the special token whose text is name,
	// such as "<|eot_id|>".
	SpecialID(name string) (int32, bool)
}

// EncodeOptions controls Encode.
type EncodeOptions struct {
	// AllowSpecial makes the text of a special token, such as
	// "<|eot_id|>", encode to that token. When it is unset such text is
	// encoded as ordinary text.
	AllowSpecial bool
	// AddBOS prepends the beginning-of-sequence token.
	AddBOS bool
}

// TokenType is the kind of a vocabulary entry, with the numbering GGUF
// files use (tokenizer.ggml.token_type).
type TokenType int32

// Token types.
const (
	TokenNormal      TokenType = 1
	TokenUnknown     TokenType = 2
	TokenControl     TokenType = 3
	TokenUserDefined TokenType = 4
	TokenUnused      TokenType = 5
	TokenByte        TokenType = 6
)

// StreamDecoder decodes tokens one at a time, as a model generates them. It
// holds back the bytes of a UTF-8 sequence that a later token may complete,
// so each piece of text it returns is whole; the concatenation of everything
// it returns, Flush included, equals Decode of all the tokens.
type StreamDecoder struct {
	tok     Tokenizer
	prev    int32
	pending []byte
	// SkipSpecial drops special tokens from the output instead of writing
	// their text.
	SkipSpecial bool
}

// NewStreamDecoder returns a StreamDecoder for tok, positioned at the start
// of a sequence.
func NewStreamDecoder(tok Tokenizer) *StreamDecoder {
	return &StreamDecoder{tok: tok, prev: -1}
}

// Next decodes one more token and returns the text that is now complete.
func (d *StreamDecoder) Next(id int32) (string, error) {
	if d.SkipSpecial && d.tok.IsSpecial(id) {
		d.prev = id
		return "", nil
	}
	buf, err := d.tok.AppendDecoded(d.pending, d.prev, id)
	if err != nil {
		return "", err
	}
	d.prev = id
	n := completeUTF8(buf)
	out := string(buf[:n])
	d.pending = append(buf[:0], buf[n:]...)
	return out, nil
}

// Flush returns the bytes held back, if any (an incomplete UTF-8 sequence
// at the end of the tokens), and resets the decoder to the start of a new
// sequence.
func (d *StreamDecoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	d.prev = -1
	return s
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a UTF-8 sequence that more bytes could complete. Invalid bytes
// count as complete: they are passed through, not held back.
func completeUTF8(b []byte) int {
	// Look at most utf8.UTFMax-1 bytes back for the start of the last
	// sequence.
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		c := b[i]
		if c < 0x80 {
			return len(b)
		}
		if c < 0xC0 { // continuation byte: keep looking for the lead byte
			continue
		}
		need := 0
		switch {
		case c >= 0xF0 && c <= 0xF4:
			need = 4
		case c >= 0xE0:
			need = 3
		case c >= 0xC2:
			need = 2
		}
		if need == 0 || len(b)-i >= need {
			return len(b)
		}
		// A lead byte followed by too few bytes: hold them back if they
		// can still become a valid sequence.
		if utf8.FullRune(b[i:]) {
			return len(b) // already known to be invalid
		}
		return i
	}
	return len(b)
}
