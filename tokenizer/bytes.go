package tokenizer

import (
	"fmt"
)

// Bytes is the simplest tokenizer: one token per byte (ids 0–255), plus a
// beginning- and an end-of-sequence token (256 and 257). It needs no files,
// which makes it the tokenizer of models trained from scratch on the
// built-in corpus.
type Bytes struct{}

// The special tokens of Bytes.
const (
	BytesBOS int32 = 256
	BytesEOS int32 = 257
)

var _ Tokenizer = Bytes{}

// Encode returns text's bytes as ids, after BOS when asked. Special-token
// text is not recognised: Bytes has no textual specials.
func (Bytes) Encode(text string, opts EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)+1)
	if opts.AddBOS {
		out = append(out, BytesBOS)
	}
	for i := 0; i < len(text); i++ {
		out = append(out, int32(text[i]))
	}
	return out
}

// Decode returns the bytes of ids as text; BOS and EOS decode to nothing.
func (b Bytes) Decode(ids []int32) (string, error) {
	var out []byte
	for _, id := range ids {
		var err error
		if out, err = b.AppendDecoded(out, -1, id); err != nil {
			return "", err
		}
	}
	return string(out), nil
}

// AppendDecoded appends id's byte to dst.
func (Bytes) AppendDecoded(dst []byte, _, id int32) ([]byte, error) {
	switch {
	case id >= 0 && id < 256:
		return append(dst, byte(id)), nil
	case id == BytesBOS || id == BytesEOS:
		return dst, nil
	}
	return dst, fmt.Errorf("tokenizer: byte id %d outside the vocabulary of 258", id)
}

// VocabSize returns 258.
func (Bytes) VocabSize() int { return 258 }

// BOS returns 256.
func (Bytes) BOS() int32 { return BytesBOS }

// EOT returns the end-of-sequence token, 257.
func (Bytes) EOT() int32 { return BytesEOS }

// IsEOS reports whether id is 257.
func (Bytes) IsEOS(id int32) bool { return id == BytesEOS }

// EOS returns [257].
func (Bytes) EOS() []int32 { return []int32{BytesEOS} }

// IsSpecial reports whether id is BOS or EOS.
func (Bytes) IsSpecial(id int32) bool { return id == BytesBOS || id == BytesEOS }

// SpecialID returns the id of "<bos>" or "<eos>".
func (Bytes) SpecialID(name string) (int32, bool) {
	switch name {
	case "<bos>":
		return BytesBOS, true
	case "<eos>":
		return BytesEOS, true
	}
	return 0, false
}
