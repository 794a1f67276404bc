package tokenizer

import "fmt"

// DecodeStream decodes ids one at a time through a StreamDecoder, as a
// stream of generated tokens is decoded (skipSpecial: leave special tokens
// out); an id the tokenizer cannot decode is an error naming it and its
// position.
func DecodeStream(tok Tokenizer, ids []int32, skipSpecial bool) (string, error) {
	return DecodeContinuation(tok, nil, ids, skipSpecial)
}

// DecodeContinuation decodes ids as the continuation of prompt: the text
// that decoding prompt and then ids adds to prompt's, so that a
// SentencePiece word-start piece keeps its space ("▁box" after a prompt is
// " box", where alone it would be "box") and a character split between
// the two is the continuation's.
func DecodeContinuation(tok Tokenizer, prompt, ids []int32, skipSpecial bool) (string, error) {
	d := NewStreamDecoder(tok)
	d.SkipSpecial = skipSpecial
	for i, id := range prompt {
		if _, err := d.Next(id); err != nil {
			return "", fmt.Errorf("prompt id %d (position %d): %w", id, i, err)
		}
	}
	// The prompt's text is dropped, bytes of a character it leaves
	// incomplete are kept: the continuation completes them.
	var out []byte
	for i, id := range ids {
		s, err := d.Next(id)
		if err != nil {
			return "", fmt.Errorf("id %d (position %d): %w", id, i, err)
		}
		out = append(out, s...)
	}
	return string(out) + d.Flush(), nil
}

// ChatRendering is a conversation rendered in tok's chat format: its text,
// its ids and which ids are the assistant's (1) or not (0).
type ChatRendering struct {
	Text          string  `json:"text"`
	IDs           []int32 `json:"ids"`
	AssistantMask []int   `json:"assistant_mask"`
}

// RenderChatIDs renders msgs in tok's chat format (RenderChatFor) and
// encodes them (EncodeChat).
func RenderChatIDs(tok Tokenizer, msgs []Message, opts ChatOptions) (ChatRendering, error) {
	text, err := RenderChatFor(tok, msgs, opts)
	if err != nil {
		return ChatRendering{}, err
	}
	ids, mask, err := EncodeChat(tok, msgs, opts)
	if err != nil {
		return ChatRendering{}, err
	}
	bits := make([]int, len(mask))
	for i, m := range mask {
		if m {
			bits[i] = 1
		}
	}
	return ChatRendering{text, ids, bits}, nil
}
