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

// LoadExamples reads and tokenizes the training data file at path: JSONL
// when its name ends in ".jsonl" or opts.Format names a format other than
// FormatAuto (ReadJSONL, TokenizeRecord), plain text otherwise (ReadText,
// TextExamples). With opts.SkipBadLines, malformed JSONL lines are skipped
// and returned; otherwise the first one is the error. An example the
// tokenizer cannot encode is a *LineError naming the file and its line.
func LoadExamples(path string, tok tokenizer.Tokenizer, opts ReadOptions) (ex []Example, skipped []LineError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ".jsonl") && (opts.Format == "" || opts.Format == FormatAuto) {
		docs, err := ReadText(f, path)
		if err != nil {
			return nil, nil, err
		}
		return TextExamples(tok, docs), nil, nil
	}
	recs, _, skipped, err := ReadJSONL(f, path, opts)
	if err != nil {
		return nil, skipped, err
	}
	for _, rec := range recs {
		ids, loss, err := TokenizeRecord(tok, rec)
		if err != nil {
			return nil, skipped, &LineError{Name: path, Line: rec.Line, Err: err}
		}
		ex = append(ex, Example{IDs: ids, Loss: loss})
	}
	return ex, skipped, nil
}
