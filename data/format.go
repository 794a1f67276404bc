package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/tokenizer"
)

// Format is the shape of the rows of a JSONL training file.
type Format string

// The formats of JSONL training data.
const (
	// FormatAuto tells the format by the keys of the file's first row.
	FormatAuto Format = "auto"
	// FormatMessages rows are {"messages": [{"role": ..., "content": ...},
	// ...]}: loss on the assistant turns.
	FormatMessages Format = "messages"
	// FormatText rows are {"text": "..."}: language modelling on the whole
	// text, as for a plain-text file.
	FormatText Format = "text"
	// FormatPromptCompletion rows are {"prompt": ..., "completion": ...},
	// two strings (raw text) or two lists of messages (a conversation):
	// loss on the completion only, the prompt is context.
	FormatPromptCompletion Format = "prompt-completion"
	// FormatShareGPT rows are {"conversations": [{"from": "human" | "gpt" |
	// "system", "value": ...}, ...]}: loss on the gpt turns.
	FormatShareGPT Format = "sharegpt"
)

// formats are the formats ParseFormat accepts, in the order of its error.
var formats = []Format{FormatAuto, FormatMessages, FormatText, FormatPromptCompletion, FormatShareGPT}

// ErrUnknownFormat is what the *LineError of a row whose format cannot be
// told by its keys wraps.
var ErrUnknownFormat = errors.New("unknown data format")

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	if f := Format(s); slices.Contains(formats, f) {
		return f, nil
	}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown data format %q; want %s", s, strings.Join(names, ", "))
}

// String returns the format's name; the zero Format is FormatAuto.
func (f Format) String() string {
	if f == "" {
		return string(FormatAuto)
	}
	return string(f)
}

// Set sets f to the format named s (ParseFormat), so that a *Format is a
// command-line flag value.
func (f *Format) Set(s string) error {
	v, err := ParseFormat(s)
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// Type names the flag value's type in usage messages.
func (f *Format) Type() string { return "format" }

// Record is one training example read from a JSONL file, in the form every
// format is read into: a conversation or a piece of raw text.
type Record struct {
	// Line is the 1-based line of the file the row came from.
	Line int
	// Messages is the conversation of a messages or sharegpt row, or of a
	// prompt-completion row of message lists (the prompt's messages, then
	// the completion's); nil for a row of raw text.
	Messages []tokenizer.Message
	// PromptMessages is how many of the leading Messages are the prompt of
	// a prompt-completion row: context, none of whose tokens carries loss,
	// whatever their role.
	PromptMessages int
	// Prompt and Completion are a row of raw text: a text row's text is
	// its Completion, with no Prompt; a prompt-completion row of strings
	// has both. Only the completion carries loss.
	Prompt, Completion string
}

// ReadJSONL reads training examples from r, one JSON object per line, in
// the format opts.Format (FormatAuto or empty: the format the keys of the
// first row that is a JSON object tell: "messages", "conversations",
// "prompt" or "completion", then "text", looked for in that order; other
// keys are ignored). Every row must have the file's format. name names r
// in errors; blank lines are ignored. It returns the format read.
//
// A malformed line, one of the wrong shape, or one that is not valid UTF-8
// or longer than jsonl.DefaultMaxLine bytes, is a *LineError naming the
// file, the line and what is wrong. It ends the read unless
// opts.SkipBadLines is set; then it is appended to skipped and reading goes
// on. A first row whose format cannot be told (ErrUnknownFormat) ends the
// read even then. Rows of FormatMessages are checked as ReadChatJSONL
// documents.
func ReadJSONL(r io.Reader, name string, opts ReadOptions) (recs []Record, format Format, skipped []LineError, err error) {
	format = opts.Format
	if format == "" {
		format = FormatAuto
	}
	jr := jsonl.NewReader(r, name)
	for {
		line, lineNo, rerr := jr.Next()
		if rerr == io.EOF {
			return recs, format, skipped, nil
		}
		var perr error
		var je *LineError
		switch {
		case errors.As(rerr, &je): // an overlong line, or one not UTF-8
			perr = je.Err
		case rerr != nil:
			return recs, format, skipped, rerr
		}
		var rec Record
		if perr == nil {
			rec, format, perr = parseRow(line, format)
		}
		if perr != nil {
			le := LineError{Name: name, Line: lineNo, Err: perr}
			if !opts.SkipBadLines || errors.Is(perr, ErrUnknownFormat) {
				return recs, format, skipped, &le
			}
			skipped = append(skipped, le)
			continue
		}
		rec.Line = lineNo
		recs = append(recs, rec)
	}
}

// parseRow parses one non-blank line of JSONL in format f; FormatAuto
// tells the format by the row's keys and returns the format told.
func parseRow(line []byte, f Format) (Record, Format, error) {
	obj, err := decodeObject(line)
	if err != nil {
		return Record{}, f, err
	}
	if f == FormatAuto {
		var ok bool
		if f, ok = detectFormat(obj); !ok {
			return Record{}, FormatAuto, fmt.Errorf(`%w: a row with the keys %s; want "messages", "text", "prompt" and "completion", or "conversations"`, ErrUnknownFormat, keyList(obj))
		}
	}
	var rec Record
	switch f {
	case FormatMessages:
		rec.Messages, err = parseMessagesRow(obj)
	case FormatText:
		rec, err = parseTextRow(obj)
	case FormatPromptCompletion:
		rec, err = parsePromptCompletionRow(obj)
	case FormatShareGPT:
		rec.Messages, err = parseShareGPTRow(obj)
	default:
		err = fmt.Errorf("unknown data format %q", string(f))
	}
	return rec, f, err
}

// detectFormat tells a row's format by its keys.
func detectFormat(obj map[string]json.RawMessage) (Format, bool) {
	has := func(k string) bool { _, ok := obj[k]; return ok }
	switch {
	case has("messages"):
		return FormatMessages, true
	case has("conversations"):
		return FormatShareGPT, true
	case has("prompt") || has("completion"):
		return FormatPromptCompletion, true
	case has("text"):
		return FormatText, true
	}
	return "", false
}

// keyList returns the keys of obj, sorted and quoted, for an error.
func keyList(obj map[string]json.RawMessage) string {
	if len(obj) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// missingKey is the error of a row of format f without its key k; it
// names the format the row looks like when that is another.
func missingKey(f Format, k string, obj map[string]json.RawMessage) error {
	if g, ok := detectFormat(obj); ok && g != f {
		return fmt.Errorf("%s row without %q (it looks like a %s row; every row of a file must have the same format)", f, k, g)
	}
	return fmt.Errorf("%s row without %q", f, k)
}

// stringField returns the string value of obj's key k, a field of a row
// of format f.
func stringField(f Format, obj map[string]json.RawMessage, k string) (string, error) {
	raw, ok := obj[k]
	if !ok {
		return "", missingKey(f, k, obj)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || isNull(raw) {
		return "", fmt.Errorf("%s row: %q is not a string", f, k)
	}
	return s, nil
}

// parseTextRow parses the object of a text row, {"text": "..."}.
func parseTextRow(obj map[string]json.RawMessage) (Record, error) {
	text, err := stringField(FormatText, obj, "text")
	if err != nil {
		return Record{}, err
	}
	if text == "" {
		return Record{}, errors.New(`text row with an empty "text"`)
	}
	return Record{Completion: text}, nil
}

// parsePromptCompletionRow parses the object of a prompt-completion row:
// {"prompt": "...", "completion": "..."}, or the same with two non-empty
// lists of messages, whose completion must hold an assistant turn.
func parsePromptCompletionRow(obj map[string]json.RawMessage) (Record, error) {
	const f = FormatPromptCompletion
	for _, k := range []string{"prompt", "completion"} {
		if _, ok := obj[k]; !ok {
			return Record{}, missingKey(f, k, obj)
		}
	}
	if isArray(obj["prompt"]) || isArray(obj["completion"]) {
		return parseConversationalPromptCompletion(obj)
	}
	prompt, err := stringField(f, obj, "prompt")
	if err != nil {
		return Record{}, err
	}
	completion, err := stringField(f, obj, "completion")
	if err != nil {
		return Record{}, err
	}
	if completion == "" {
		return Record{}, fmt.Errorf("%s row with an empty %q", f, "completion")
	}
	return Record{Prompt: prompt, Completion: completion}, nil
}

// parseConversationalPromptCompletion parses a prompt-completion row whose
// prompt or completion is a JSON array: both must be lists of messages.
func parseConversationalPromptCompletion(obj map[string]json.RawMessage) (Record, error) {
	const f = FormatPromptCompletion
	if !isArray(obj["prompt"]) || !isArray(obj["completion"]) {
		return Record{}, fmt.Errorf(`%s row: "prompt" and "completion" must both be strings or both be lists of messages`, f)
	}
	prompt, err := parseMessageList("prompt", obj["prompt"])
	if err != nil {
		return Record{}, fmt.Errorf("%s row: %w", f, err)
	}
	completion, err := parseMessageList("completion", obj["completion"])
	if err != nil {
		return Record{}, fmt.Errorf("%s row: %w", f, err)
	}
	if !hasAssistant(completion) {
		return Record{}, fmt.Errorf(`%s row: no assistant message in "completion"`, f)
	}
	return Record{Messages: append(prompt, completion...), PromptMessages: len(prompt)}, nil
}

// isArray reports whether raw is a JSON array.
func isArray(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return strings.HasPrefix(t, "[")
}

// shareGPTRoles maps the "from" of a ShareGPT turn to a message role.
var shareGPTRoles = map[string]string{"human": "user", "gpt": "assistant", "system": "system"}

// shareGPTTurn is a turn of a ShareGPT conversation as it appears in the
// file, kept raw so that a field of the wrong type is reported precisely.
type shareGPTTurn struct {
	From  json.RawMessage `json:"from"`
	Value json.RawMessage `json:"value"`
}

// parseShareGPTRow parses the object of a ShareGPT row,
// {"conversations": [{"from": ..., "value": ...}, ...]}, mapping "human" to
// user, "gpt" to assistant and "system" to system turns.
func parseShareGPTRow(obj map[string]json.RawMessage) ([]tokenizer.Message, error) {
	const f = FormatShareGPT
	rawConv, ok := obj["conversations"]
	if !ok {
		return nil, missingKey(f, "conversations", obj)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(rawConv, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf(`%s row: "conversations" is not an array`, f)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf(`%s row: "conversations" is empty`, f)
	}
	msgs := make([]tokenizer.Message, len(raw))
	for i, rt := range raw {
		var t shareGPTTurn
		if err := json.Unmarshal(rt, &t); err != nil || isNull(rt) {
			return nil, fmt.Errorf("%s row: turn %d is not a JSON object", f, i)
		}
		var from string
		if t.From == nil {
			return nil, fmt.Errorf(`%s row: turn %d has no "from"`, f, i)
		}
		if err := json.Unmarshal(t.From, &from); err != nil || isNull(t.From) {
			return nil, fmt.Errorf(`%s row: turn %d: "from" is not a string`, f, i)
		}
		role, ok := shareGPTRoles[from]
		if !ok {
			return nil, fmt.Errorf(`%s row: turn %d is from %q; want human, gpt or system`, f, i, from)
		}
		if t.Value == nil {
			return nil, fmt.Errorf(`%s row: turn %d has no "value"`, f, i)
		}
		msgs[i].Role = role
		if err := json.Unmarshal(t.Value, &msgs[i].Content); err != nil || isNull(t.Value) {
			return nil, fmt.Errorf(`%s row: turn %d: "value" is not a string`, f, i)
		}
	}
	if !hasAssistant(msgs) {
		return nil, fmt.Errorf("%s row: no gpt turn", f)
	}
	return msgs, nil
}

// TokenizeRecord encodes a training example with tok and returns its ids
// and loss mask.
//
// A conversation is encoded by tokenizer.EncodeChat: the assistant turns
// carry loss, except those of a prompt-completion row's prompt, which is
// context only. Raw text is encoded as TRL encodes it: the prompt and the
// completion are concatenated and encoded after the beginning-of-sequence
// token, and the tokens past those the prompt alone encodes to carry loss,
// as does the end-of-sequence token (tok's first) that ends the example. A
// text row (no prompt) is so encoded as a plain-text document is by
// TextExamples.
func TokenizeRecord(tok tokenizer.Tokenizer, rec Record) (ids []int32, lossMask []bool, err error) {
	if rec.Messages == nil {
		ids = tok.Encode(rec.Prompt+rec.Completion, tokenizer.EncodeOptions{AddBOS: true})
		n := commonPrefix(ids, tok.Encode(rec.Prompt, tokenizer.EncodeOptions{AddBOS: true}))
		ids = append(ids, tok.EOS()[0])
		lossMask = make([]bool, len(ids))
		for i := n; i < len(ids); i++ {
			lossMask[i] = true
		}
		return ids, lossMask, nil
	}
	ids, lossMask, err = tokenizer.EncodeChat(tok, rec.Messages, tokenizer.ChatOptions{})
	if err != nil || rec.PromptMessages == 0 {
		return ids, lossMask, err
	}
	prompt, _, err := tokenizer.EncodeChat(tok, rec.Messages[:rec.PromptMessages], tokenizer.ChatOptions{})
	if err != nil {
		return nil, nil, err
	}
	for i := range commonPrefix(ids, prompt) {
		lossMask[i] = false
	}
	return ids, lossMask, nil
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
