package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/turnwise/turnwise/tokenizer"
)

// apiError is an error answered in the API's shape, with its HTTP status.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// errorBody is the JSON body of an error reply.
type errorBody struct {
	Error *apiError `json:"error"`
}

// invalid returns a 400 invalid_request_error about param ("" for none),
// with code ("" for none).
func invalid(param, code, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "invalid_request_error", param, code, format, args...)
}

func newError(status int, typ, param, code, format string, args ...any) *apiError {
	e := &apiError{Status: status, Message: fmt.Sprintf(format, args...), Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// maxBodyBytes bounds a request body.
const maxBodyBytes = 8 << 20

// maxStops and maxStopBytes bound the stop strings of a request: their
// number and each one's length (the search for them costs up to the
// square of the length per token).
const (
	maxStops     = 16
	maxStopBytes = 512
)

// sampling are the fields common to both endpoints.
type sampling struct {
	Model         string          `json:"model"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
}

// chatMessage is one message of a chat request; content is a string or an
// array of parts of which the text parts are used.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// completionRequest is the body of POST /v1/completions; prompt is a
// string, an array of one string, or an array of token ids.
type completionRequest struct {
	sampling
	Prompt json.RawMessage `json:"prompt"`
}

// decodeBody reads one JSON object from body into v; anything else is an
// invalid request.
func decodeBody(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "", "the request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field := strings.TrimPrefix(te.Field, "sampling.")
			return invalid(field, "", "field %q: want %s, got a JSON %s", field, te.Type, te.Value)
		}
		return invalid("", "", "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return invalid("", "", "the request body holds more than one JSON value")
	}
	return nil
}

// options are a request's checked generation options.
type options struct {
	temperature, topP float32
	maxTokens         int // 0: what the context leaves
	seed              *uint64
	stops             []string
	stream, usage     bool
}

// check validates the sampling fields; maxTokens is the max_tokens (or
// max_completion_tokens) field.
func (s *sampling) check(maxTokens *int, maxParam string) (options, *apiError) {
	o := options{temperature: 1, topP: 1, stream: s.Stream}
	if s.Temperature != nil {
		t := *s.Temperature
		if !(t >= 0) || math.IsInf(t, 0) {
			return o, invalid("temperature", "invalid_value", "temperature %v: want a number ≥ 0", t)
		}
		o.temperature = float32(t)
	}
	if s.TopP != nil {
		p := *s.TopP
		if !(p > 0 && p <= 1) {
			return o, invalid("top_p", "invalid_value", "top_p %v: want a number in (0, 1]", p)
		}
		o.topP = float32(p)
	}
	if maxTokens != nil {
		if *maxTokens <= 0 {
			return o, invalid(maxParam, "invalid_value", "%s %d: want a positive number of tokens", maxParam, *maxTokens)
		}
		o.maxTokens = *maxTokens
	}
	if s.N != nil && *s.N != 1 {
		return o, invalid("n", "invalid_value", "n %d: this server returns one choice per request; send n = 1 or leave it out", *s.N)
	}
	if s.Seed != nil {
		v := uint64(*s.Seed)
		o.seed = &v
	}
	stops, err := parseStop(s.Stop)
	if err != nil {
		return o, err
	}
	o.stops = stops
	if s.StreamOptions != nil {
		if !s.Stream {
			return o, invalid("stream_options", "", "stream_options is only allowed with stream: true")
		}
		o.usage = s.StreamOptions.IncludeUsage
	}
	return o, nil
}

// parseStop reads the stop field: null, a string or an array of strings.
// Empty strings are dropped.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	var many []string
	if err := json.Unmarshal(raw, &one); err == nil {
		many = []string{one}
	} else if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("stop", "", "stop: want a string or an array of strings")
	}
	if len(many) > maxStops {
		return nil, invalid("stop", "", "stop: %d strings; at most %d are allowed", len(many), maxStops)
	}
	var out []string
	for _, s := range many {
		if len(s) > maxStopBytes {
			return nil, invalid("stop", "", "stop: a string of %d bytes; at most %d are allowed", len(s), maxStopBytes)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// messages converts a chat request's messages, reading content given as
// text parts.
func (r *chatRequest) messages() ([]tokenizer.Message, *apiError) {
	if len(r.Messages) == 0 {
		return nil, invalid("messages", "", "messages: want at least one message")
	}
	out := make([]tokenizer.Message, len(r.Messages))
	for i, m := range r.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return nil, invalid(fmt.Sprintf("messages[%d].content", i), "", "messages[%d].content: %v", i, err)
		}
		out[i] = tokenizer.Message{Role: m.Role, Content: text}
	}
	return out, nil
}

// contentText returns a message's content: a string, null (empty), or an
// array of parts whose text parts are joined.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of text parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d has type %q; only text parts are supported", j, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// promptIDs reads a completion request's prompt: a string or an array of
// one string (encoded after BOS), or an array of token ids (as they are).
func (r *completionRequest) promptIDs(tok tokenizer.Tokenizer, bos int32, vocab int) ([]int32, *apiError) {
	raw := r.Prompt
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("prompt", "", "prompt: required")
	}
	var text string
	var texts []string
	var ids []int32
	switch {
	case json.Unmarshal(raw, &text) == nil:
	case json.Unmarshal(raw, &texts) == nil:
		if len(texts) != 1 {
			return nil, invalid("prompt", "", "prompt: %d strings; this server takes one prompt per request", len(texts))
		}
		text = texts[0]
	case json.Unmarshal(raw, &ids) == nil:
		if len(ids) == 0 {
			return nil, invalid("prompt", "", "prompt: empty array of token ids")
		}
		for i, id := range ids {
			if id < 0 || int(id) >= vocab {
				return nil, invalid("prompt", "", "prompt: token %d = %d is outside the vocabulary of %d", i, id, vocab)
			}
		}
		return ids, nil
	default:
		return nil, invalid("prompt", "", "prompt: want a string, an array of one string, or an array of token ids")
	}
	return append([]int32{bos}, tok.Encode(text, tokenizer.EncodeOptions{})...), nil
}

// usage is the token count of a reply.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatReply is a whole chat completion.
type chatReply struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *textMessage `json:"message,omitempty"`
	Delta        *textMessage `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type textMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// completionReply is a whole text completion or a chunk of one.
type completionReply struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// modelList is the body of GET /v1/models.
type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
