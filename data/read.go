// Package data reads, tokenizes, splits and packs the examples turnwise
// trains on.
//
// Two kinds of input are supported. JSONL (ReadJSONL) holds one example
// per line, in one of the formats Format names: a chat conversation,
// {"messages": [{"role": "user", "content": "..."}, ...]}, where only the
// assistant turns carry loss; TRL's {"text": "..."} and
// {"prompt": ..., "completion": ...} rows; or ShareGPT's
// {"conversations": [{"from": "human", "value": "..."}, ...]}. Every
// format is read into a Record, a conversation or raw text, and
// TokenizeRecord gives its loss mask. Plain text (ReadText) holds
// documents for pre-training-style data, where every token carries loss.
//
// LoadExamples reads and tokenizes a file of either kind in one call.
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

	"github.com/turnwise/turnwise/internal/jsonerr"
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

// ReadOptions controls ReadJSONL, ReadChatJSONL and LoadExamples.
type ReadOptions struct {
	// SkipBadLines makes a malformed line be skipped and reported in the
	// skipped list instead of ending the read with an error.
	SkipBadLines bool
	// Format is the format of a JSONL file's rows; empty or FormatAuto
	// means the format the first row's keys tell (see ReadJSONL).
	Format Format
}

// rawMessage is a message as it appears in the file, kept raw so that a
// field of the wrong type is reported precisely.
type rawMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ReadChatJSONL reads conversations from r, one JSON object per line;
// name names r in errors. Blank lines are ignored. It is ReadJSONL for
// files of FormatMessages, whatever opts.Format says.
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
	opts.Format = FormatMessages
	recs, _, skipped, err := ReadJSONL(r, name, opts)
	for _, rec := range recs {
		examples = append(examples, Chat{Messages: rec.Messages, Line: rec.Line})
	}
	return examples, skipped, err
}

// decodeObject decodes one non-blank line of JSONL, which must hold a JSON
// object.
func decodeObject(line []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", jsonerr.Reword(err))
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	return obj, nil
}

// parseMessagesRow parses the object of a chat JSONL line,
// {"messages": [...]}.
func parseMessagesRow(obj map[string]json.RawMessage) ([]tokenizer.Message, error) {
	rawMsgs, ok := obj["messages"]
	if !ok {
		return nil, errors.New(`missing "messages"`)
	}
	msgs, err := parseMessageList("messages", rawMsgs)
	if err != nil {
		return nil, err
	}
	if !hasAssistant(msgs) {
		return nil, errors.New("no assistant message")
	}
	return msgs, nil
}

// parseMessageList parses a non-empty JSON array of messages,
// [{"role": ..., "content": ...}, ...], the value of the field key. Roles
// must be "system", "user" or "assistant" and contents strings.
func parseMessageList(key string, rawMsgs json.RawMessage) ([]tokenizer.Message, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(rawMsgs, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%q is not an array", key)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%q is empty", key)
	}
	msgs := make([]tokenizer.Message, len(raw))
	for i, rm := range raw {
		var m rawMessage
		if err := json.Unmarshal(rm, &m); err != nil || isNull(rm) {
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
	}
	return msgs, nil
}

// hasAssistant reports whether one of msgs is an assistant turn.
func hasAssistant(msgs []tokenizer.Message) bool {
	for _, m := range msgs {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
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
