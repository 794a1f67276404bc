package data

import (
	"os"
	"strings"

	"github.com/turnwise/turnwise/tokenizer"
)

// TextExamples tokenizes documents with tok as examples with the loss on
// every token (TokenizeText with a beginning-of-sequence token), each
// ending with tok's first end-of-sequence token, which is learned too.
func TextExamples(tok tokenizer.Tokenizer, docs []string) []Example {
	ex := make([]Example, 0, len(docs))
	for _, d := range docs {
		ids, loss := TokenizeText(tok, d, true)
		ex = append(ex, Example{IDs: append(ids, tok.EOS()[0]), Loss: append(loss, true)})
	}
	return ex
}

// LoadExamples reads and tokenizes the training data file at path: chat
// JSONL when its name ends in ".jsonl" (ReadChatJSONL, loss on the
// assistant turns), plain text otherwise (ReadText, TextExamples). With
// opts.SkipBadLines, malformed chat lines are skipped and returned;
// otherwise the first one is the error. A conversation the tokenizer
// cannot encode is a *LineError naming the file and its line.
func LoadExamples(path string, tok tokenizer.Tokenizer, opts ReadOptions) (ex []Example, skipped []LineError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ".jsonl") {
		docs, err := ReadText(f, path)
		if err != nil {
			return nil, nil, err
		}
		return TextExamples(tok, docs), nil, nil
	}
	chats, skipped, err := ReadChatJSONL(f, path, opts)
	if err != nil {
		return nil, skipped, err
	}
	for _, c := range chats {
		ids, loss, err := tokenizer.EncodeChat(tok, c.Messages, tokenizer.ChatOptions{})
		if err != nil {
			return nil, skipped, &LineError{Name: path, Line: c.Line, Err: err}
		}
		ex = append(ex, Example{IDs: ids, Loss: loss})
	}
	return ex, skipped, nil
}
