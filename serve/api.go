package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
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
	Model            string             `json:"model"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	MaxTokens        *int               `json:"max_tokens"`
	N                *int               `json:"n"`
	Seed             *int64             `json:"seed"`
	Stop             json.RawMessage    `json:"stop"`
	Stream           bool               `json:"stream"`
	StreamOptions    *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// User identifies the client's end user; it plays no part in
	// generation (the request log names it).
	User string `json:"user"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Functions           json.RawMessage `json:"functions"`
	FunctionCall        json.RawMessage `json:"function_call"`
	ResponseFormat      json.RawMessage `json:"response_format"`
}

// chatMessage is one message of a chat request; content is a string or an
// array of parts of which the text parts are used.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// completionRequest is the body of POST /v1/completions; prompt is a
// string, an array of token ids, or an array of either.
type completionRequest struct {
	sampling
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	BestOf   *int            `json:"best_of"`
	Suffix   json.RawMessage `json:"suffix"`
}

// decodeBody reads one JSON object from body into v; anything else is an
// invalid request.
func decodeBody(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "", "the request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name, _ = strconv.Unquote(name)
			return invalid(name, "unsupported_parameter", "%s: this server does not support this parameter", name)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field := strings.TrimPrefix(te.Field, "sampling.")
			return invalid(field, "", "field %q: want %s, got a JSON %s", field, jsonerr.Kind(te.Type), te.Value)
		}
		return invalid("", "", "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return invalid("", "", "the request body holds more than one JSON value")
	}
	return nil
}

// maxChoices bounds n, the choices of one request (per prompt).
const maxChoices = 16

// options are a request's checked generation options.
type options struct {
	sample        sampler
	maxTokens     int // 0: what the context leaves
	n             int // choices per prompt
	seed          *uint64
	stops         []string
	stream, usage bool
}

// check validates the sampling fields; maxTokens is the max_tokens (or
// max_completion_tokens) field; vocab is the model's vocabulary size.
func (s *sampling) check(maxTokens *int, maxParam string, vocab int) (options, *apiError) {
	o := options{sample: sampler{params: engine.SampleParams{Temperature: 1, TopP: 1}, logprobs: -1}, n: 1, stream: s.Stream}
	p := &o.sample
	if s.Temperature != nil {
		t := *s.Temperature
		if !(t >= 0) || math.IsInf(t, 0) {
			return o, invalid("temperature", "invalid_value", "temperature %v: want a number ≥ 0", t)
		}
		p.params.Temperature = float32(t)
	}
	if s.TopP != nil {
		v := *s.TopP
		if !(v > 0 && v <= 1) {
			return o, invalid("top_p", "invalid_value", "top_p %v: want a number in (0, 1]", v)
		}
		p.params.TopP = float32(v)
	}
	if s.TopK != nil {
		k := *s.TopK
		if k < -1 {
			return o, invalid("top_k", "invalid_value", "top_k %d: want a positive count, or 0 or -1 for every token", k)
		}
		p.params.TopK = max(k, 0)
	}
	if p.params.Temperature == 0 {
		p.params.TopP, p.params.TopK = 0, 0 // greedy: top_p and top_k play no part
	}
	for _, pen := range []struct {
		name string
		v    *float64
		to   *float32
	}{{"presence_penalty", s.PresencePenalty, &p.presence}, {"frequency_penalty", s.FrequencyPenalty, &p.frequency}} {
		if pen.v == nil {
			continue
		}
		if !(*pen.v >= -2 && *pen.v <= 2) {
			return o, invalid(pen.name, "invalid_value", "%s %v: want a number in [-2, 2]", pen.name, *pen.v)
		}
		*pen.to = float32(*pen.v)
	}
	for k, v := range s.LogitBias {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= vocab {
			return o, invalid("logit_bias", "invalid_value", "logit_bias: key %q is not a token id of the vocabulary of %d", k, vocab)
		}
		if !(v >= -100 && v <= 100) {
			return o, invalid("logit_bias", "invalid_value", "logit_bias: token %d: bias %v; want a number in [-100, 100]", id, v)
		}
		if p.bias == nil {
			p.bias = map[int32]float32{}
		}
		p.bias[int32(id)] = float32(v)
	}
	if maxTokens != nil {
		if *maxTokens <= 0 {
			return o, invalid(maxParam, "invalid_value", "%s %d: want a positive number of tokens", maxParam, *maxTokens)
		}
		o.maxTokens = *maxTokens
	}
	if s.N != nil {
		if *s.N < 1 || *s.N > maxChoices {
			return o, invalid("n", "invalid_value", "n %d: want a count of choices from 1 to %d", *s.N, maxChoices)
		}
		o.n = *s.N
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

// refuseSet answers 400 for the first of fields (name, raw value) that is
// set: parameters this server does not implement.
func refuseSet(fields ...any) *apiError {
	for i := 0; i+1 < len(fields); i += 2 {
		name, raw := fields[i].(string), fields[i+1].(json.RawMessage)
		if len(raw) > 0 && string(raw) != "null" {
			return invalid(name, "unsupported_parameter", "%s: this server does not support this parameter", name)
		}
	}
	return nil
}

// check validates a chat request's own fields into o.
func (r *chatRequest) check(o *options) *apiError {
	if err := refuseSet("tools", r.Tools, "tool_choice", r.ToolChoice, "functions", r.Functions, "function_call", r.FunctionCall); err != nil {
		return err
	}
	if len(r.ResponseFormat) > 0 && string(r.ResponseFormat) != "null" {
		var f struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(r.ResponseFormat, &f) != nil || f.Type != "text" {
			return invalid("response_format", "unsupported_parameter", "response_format: only {\"type\": \"text\"} is supported (no JSON mode)")
		}
	}
	if r.TopLogprobs != nil {
		n := *r.TopLogprobs
		switch {
		case !r.Logprobs:
			return invalid("top_logprobs", "", "top_logprobs is only allowed with logprobs: true")
		case n < 0 || n > maxTopLogprobs:
			return invalid("top_logprobs", "invalid_value", "top_logprobs %d: want a count from 0 to %d", n, maxTopLogprobs)
		}
	}
	if r.Logprobs {
		o.sample.logprobs = 0
		if r.TopLogprobs != nil {
			o.sample.logprobs = *r.TopLogprobs
		}
	}
	return nil
}

// check validates a completion request's own fields into o.
func (r *completionRequest) check(o *options) *apiError {
	if err := refuseSet("suffix", r.Suffix); err != nil {
		return err
	}
	if r.BestOf != nil && *r.BestOf != o.n {
		return invalid("best_of", "unsupported_parameter", "best_of %d: this server returns every choice it generates; leave best_of out or equal to n (%d)", *r.BestOf, o.n)
	}
	if r.Logprobs != nil {
		n := *r.Logprobs
		if n < 0 || n > maxTopLogprobs {
			return invalid("logprobs", "invalid_value", "logprobs %d: want a count from 0 to %d", n, maxTopLogprobs)
		}
		if r.Echo && n > 0 {
			return invalid("logprobs", "unsupported_parameter", "logprobs %d with echo: the prompt's alternatives are not computed; send logprobs 0 with echo", n)
		}
		o.sample.logprobs = n
	}
	return nil
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

// maxPrompts bounds the prompts of one completion request.
const maxPrompts = 64

// promptIDs reads a completion request's prompt: a string (encoded after
// BOS), an array of token ids (as they are), or an array of either.
func (r *completionRequest) promptIDs(tok tokenizer.Tokenizer, bos int32, vocab int) ([][]int32, *apiError) {
	raw := r.Prompt
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("prompt", "", "prompt: required")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil && len(list) > 0 && !isNumber(list[0]) {
		if len(list) > maxPrompts {
			return nil, invalid("prompt", "", "prompt: %d prompts; at most %d are allowed", len(list), maxPrompts)
		}
		out := make([][]int32, len(list))
		for i, p := range list {
			ids, err := onePrompt(p, tok, bos, vocab, fmt.Sprintf("prompt[%d]", i))
			if err != nil {
				return nil, err
			}
			out[i] = ids
		}
		return out, nil
	}
	ids, err := onePrompt(raw, tok, bos, vocab, "prompt")
	if err != nil {
		return nil, err
	}
	return [][]int32{ids}, nil
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw json.RawMessage) bool {
	var f float64
	return json.Unmarshal(raw, &f) == nil
}

// onePrompt reads one prompt, named name in errors: a string or an array of
// token ids.
func onePrompt(raw json.RawMessage, tok tokenizer.Tokenizer, bos int32, vocab int, name string) ([]int32, *apiError) {
	var text string
	var ids []int32
	switch {
	case json.Unmarshal(raw, &text) == nil:
		return append([]int32{bos}, tok.Encode(text, tokenizer.EncodeOptions{})...), nil
	case json.Unmarshal(raw, &ids) == nil:
		if len(ids) == 0 {
			return nil, invalid("prompt", "", "%s: empty array of token ids", name)
		}
		for i, id := range ids {
			if id < 0 || int(id) >= vocab {
				return nil, invalid("prompt", "", "%s: token %d = %d is outside the vocabulary of %d", name, i, id, vocab)
			}
		}
		return ids, nil
	}
	return nil, invalid("prompt", "", "%s: want a string, an array of token ids, or an array of either", name)
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

// chatLogprobs is a chat choice's log-probabilities.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal *string            `json:"refusal"`
}

// chatTokenLogprob is a token's log-probability in a chat reply, with the
// most likely tokens' (top_logprobs).
type chatTokenLogprob struct {
	chatTopLogprob
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// completionLogprobs is a text completion choice's log-probabilities: for
// each token its text, log-probability (null for a prompt's first token),
// the most likely tokens' (by text), and where its text starts in the
// choice's text.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
	offset        int                  // where the next token's text starts
}

// tokenText returns the bytes token id adds after token prev.
func (s *Server) tokenText(prev, id int32) []byte {
	b, _ := s.tok.AppendDecoded(nil, prev, id) // an id the tokenizer lacks adds nothing
	return b
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

func (s *Server) chatLogprobs(lps []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: []chatTokenLogprob{}}
	for _, lp := range lps {
		b := s.tokenText(lp.prev, lp.token)
		e := chatTokenLogprob{chatTopLogprob: chatTopLogprob{Token: string(b), Logprob: lp.logprob, Bytes: byteInts(b)}, TopLogprobs: []chatTopLogprob{}}
		for _, alt := range lp.top {
			ab := s.tokenText(lp.prev, alt.token)
			e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{Token: string(ab), Logprob: alt.logprob, Bytes: byteInts(ab)})
		}
		out.Content = append(out.Content, e)
	}
	return out
}

// addPromptLogprobs adds a prompt's tokens (echo), with their
// log-probabilities lps when scored (nil: null each).
func (s *Server) addPromptLogprobs(out *completionLogprobs, prompt []int32, lps []float32) {
	prev := int32(-1)
	for i, id := range prompt {
		var lp *float32
		if i > 0 && i-1 < len(lps) {
			lp = &lps[i-1]
		}
		text := ""
		if !s.tok.IsSpecial(id) {
			text = string(s.tokenText(prev, id))
		}
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, lp)
		out.TopLogprobs = append(out.TopLogprobs, nil)
		out.TextOffset = append(out.TextOffset, out.offset)
		out.offset += len(text)
		prev = id
	}
}

// addCompletionLogprobs adds generated tokens.
func (s *Server) addCompletionLogprobs(out *completionLogprobs, lps []tokenLogprob) {
	if out.Tokens == nil {
		out.Tokens, out.TokenLogprobs, out.TopLogprobs, out.TextOffset = []string{}, []*float32{}, []map[string]float32{}, []int{}
	}
	for _, lp := range lps {
		text := string(s.tokenText(lp.prev, lp.token))
		top := map[string]float32{}
		for _, alt := range lp.top {
			top[string(s.tokenText(lp.prev, alt.token))] = alt.logprob
		}
		v := lp.logprob
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, &v)
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, out.offset)
		out.offset += len(text)
	}
}
