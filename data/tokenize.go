package data

import (
	"fmt"

	"github.com/turnwise/turnwise/tokenizer"
)

// Example is a tokenized training example.
type Example struct {
	// IDs are the token ids.
	IDs []int32
	// Loss, parallel to IDs, is true for the tokens the model is trained
	// to predict.
	Loss []bool
}

// TokenizeChat encodes a conversation with tok in the chat format of
// tokenizer.EncodeChat. The loss mask is the tokenizer's assistant mask:
// only the tokens of assistant turns (through their end-of-turn token)
// carry loss.
func TokenizeChat(tok tokenizer.Tokenizer, c Chat) (ids []int32, lossMask []bool, err error) {
	ids, lossMask, err = tokenizer.EncodeChat(tok, c.Messages, tokenizer.ChatOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("line %d: %w", c.Line, err)
	}
	return ids, lossMask, nil
}

// TokenizeText encodes a plain-text document with tok, the text of special
// tokens encoded as ordinary text, preceded by the beginning-of-sequence
// token when bos is set. Every token carries loss except the
// beginning-of-sequence token, which is never predicted.
func TokenizeText(tok tokenizer.Tokenizer, doc string, bos bool) (ids []int32, lossMask []bool) {
	ids = tok.Encode(doc, tokenizer.EncodeOptions{AddBOS: bos})
	lossMask = make([]bool, len(ids))
	for i := range lossMask {
		lossMask[i] = true
	}
	if bos && len(ids) > 0 {
		lossMask[0] = false
	}
	return ids, lossMask
}
