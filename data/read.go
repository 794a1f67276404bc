// Package data reads, tokenizes, splits and packs the examples turnwise
// trains on.
//
// Two input formats are supported. Chat JSONL holds one conversation per
// line, {"messages": [{"role": "user", "content": "..."}, ...]}; only the
// assistant turns carry loss. Plain text (ReadText) holds documents for
// pre-training-style data, where every token carries loss.
//
// LoadExamples reads and tokenizes a file of either format in one call.
// Malformed lines are reported as *LineError, the project's one line-error
// type.
//
// Tokenized examples are packed into llama.Batch values by a Packer, which
// visits them in a seeded, deterministic order and exposes a Position that
// a resumed run restores to see exactly the same next batch.
package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/tokenizer"
)

// Chat is one conversation read from a chat JSONL file.
type Chat struct {
	// Messages are the conversation's turns, in order.
	Messages []tokenizer.Message
	// Line is the 1-based line of the file the conversation came from.
	Line int
}

// LineError is a problem with one line of an input file: Name, the 1-based
// Line and Err, what is wrong. It is the one line-error type of the
// project, shared with sweetrl.LineError.
type LineError = jsonl.LineError

// ReadOptions controls ReadChatJSONL.
type ReadOptions struct {
	// SkipBadLines makes a malformed line be skipped and reported in the
	// skipped list instead of ending the read with an error.
	SkipBadLines bool
}

// rawMessage is a message as it appears in the file, kept raw so that a
// field of the wrong type is reported precisely.
type rawMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ReadChatJSONL reads conversations from r, one JSON object per line;
// name names r in errors. Blank lines are ignored.
//
// A line is malformed when it is not a JSON object, when its "messages"
// field is missing, not an array or empty, when a message's role is not
// "system", "user" or "assistant", when a message's role or content is not
// a string, when no message is an assistant turn (such an example would
// have nothing to learn), when it is not valid UTF-8 or when it is longer
// than jsonl.DefaultMaxLine bytes. A malformed line ends the read with a *LineError
// naming the file and the line, unless opts.SkipBadLines is set; then it is
// appended to skipped and reading continues. err reports only malformed
// lines in strict mode and failures of r itself.
func ReadChatJSONL(r io.Reader, name string, opts ReadOptions) (examples []Chat, skipped []LineError, err error) {
	jr := jsonl.NewReader(r, name)
	for {
		line, lineNo, rerr := jr.Next()
		if rerr == io.EOF {
			return examples, skipped, nil
		}
		var perr error
		var je *LineError
		switch {
		case errors.As(rerr, &je): // an overlong line, or one not UTF-8
			perr = je.Err
		case rerr != nil:
			return examples, skipped, rerr
		}
		var msgs []tokenizer.Message
		if perr == nil {
			msgs, perr = parseChatLine(line)
		}
		if perr != nil {
			le := LineError{Name: name, Line: lineNo, Err: perr}
			if !opts.SkipBadLines {
				return examples, skipped, &le
			}
			skipped = append(skipped, le)
			continue
		}
		examples = append(examples, Chat{Messages: msgs, Line: lineNo})
	}
}

// parseChatLine parses one non-blank line of chat JSONL.
func parseChatLine(line []byte) ([]tokenizer.Message, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	rawMsgs, ok := obj["messages"]
	if !ok {
		return nil, errors.New(`missing "messages"`)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(rawMsgs, &raw); err != nil || raw == nil {
		return nil, errors.New(`"messages" is not an array`)
	}
	if len(raw) == 0 {
		return nil, errors.New(`"messages" is empty`)
	}
	msgs := make([]tokenizer.Message, len(raw))
	hasAssistant := false
	for i, rm := range raw {
		var m rawMessage
		if err := json.Unmarshal(rm, &m); err != nil || bytes.Equal(bytes.TrimSpace(rm), []byte("null")) {
			return nil, fmt.Errorf("message %d is not a JSON object", i)
		}
		if m.Role == nil {
			return nil, fmt.Errorf("message %d has no role", i)
		}
		if err := json.Unmarshal(m.Role, &msgs[i].Role); err != nil || isNull(m.Role) {
			return nil, fmt.Errorf("message %d: role is not a string", i)
		}
		switch msgs[i].Role {
		case "system", "user", "assistant":
		default:
			return nil, fmt.Errorf("message %d has unknown role %q; want system, user or assistant", i, msgs[i].Role)
		}
		if m.Content == nil {
			return nil, fmt.Errorf("message %d has no content", i)
		}
		if err := json.Unmarshal(m.Content, &msgs[i].Content); err != nil || isNull(m.Content) {
			return nil, fmt.Errorf("message %d: content is not a string", i)
		}
		if msgs[i].Role == "assistant" {
			hasAssistant = true
		}
	}
	if !hasAssistant {
		return nil, errors.New("no assistant message")
	}
	return msgs, nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// ReadText reads plain-text documents from r; name names r in errors.
//
// Documents are separated by one or more blank lines (lines that are
// empty or hold only whitespace), so a file with no blank lines is one
// document. Each document keeps its lines joined by "\n" without the final
// newline; carriage returns before newlines are dropped. A file with
// paragraphs that belong together should therefore be given one document
// per file with no blank lines inside, or paragraphs accepted as documents.
func ReadText(r io.Reader, name string) ([]string, error) {
	br := bufio.NewReader(r)
	var docs []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = cur[:0]
		}
	}
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return docs, fmt.Errorf("%s:%d: reading: %w", name, lineNo, err)
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if strings.TrimSpace(line) == "" {
			flush()
		} else {
			cur = append(cur, line)
		}
		if err == io.EOF {
			flush()
			return docs, nil
		}
	}
}
