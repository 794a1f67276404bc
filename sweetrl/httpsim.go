package sweetrl

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnwise/turnwise/tokenizer"
)

// NoResponse is the reply HTTPSimulator gives when every attempt to reach
// the simulator model failed, as the reference implementation does; the
// episode then goes on with it as the human's turn.
const NoResponse = "No response."

// Defaults of HTTPSimulatorConfig.
const (
	// DefaultSimulatorTimeout is the time limit of one request.
	DefaultSimulatorTimeout = 2 * time.Minute
	// DefaultSimulatorRetries is the number of retries after a failed
	// first attempt.
	DefaultSimulatorRetries = 3
	// DefaultSimulatorBackoff is the base wait before the first retry.
	DefaultSimulatorBackoff = 500 * time.Millisecond
	// DefaultSimulatorMaxBackoff caps the wait before any retry.
	DefaultSimulatorMaxBackoff = 30 * time.Second
	// SimulatorCheckTimeout bounds Check's request, whatever Timeout is.
	SimulatorCheckTimeout = 30 * time.Second
)

// ErrSimulatorFailing is what Respond wraps once MaxFailures calls have
// failed.
var ErrSimulatorFailing = errors.New("the simulator failed too many calls")

// maxReplyBytes bounds the size of a response body read from the server.
const maxReplyBytes = 8 << 20

// HTTPSimulatorConfig configures an HTTPSimulator.
type HTTPSimulatorConfig struct {
	// BaseURL is the root of the OpenAI-compatible API, such as
	// "http://localhost:8000/v1"; requests go to BaseURL +
	// "/chat/completions". It must be an absolute http or https URL.
	BaseURL string
	// Model is the model name sent with each request; it must not be
	// empty.
	Model string
	// APIKeyEnv names the environment variable holding the API key, sent
	// as "Authorization: Bearer <key>". It is read once, by
	// NewHTTPSimulator, and must then be set and non-empty. Empty: no
	// Authorization header is sent.
	APIKeyEnv string
	// Timeout limits each request, from sending it to reading the whole
	// reply. 0 means DefaultSimulatorTimeout.
	Timeout time.Duration
	// MaxRetries is the number of retries after a failed first attempt.
	// 0 means DefaultSimulatorRetries; a negative value means none.
	MaxRetries int
	// Backoff is the base wait before a retry: the k-th retry waits
	// Backoff·2^(k-1), at most MaxBackoff, of which the upper half is
	// drawn at random. 0 means DefaultSimulatorBackoff.
	Backoff time.Duration
	// MaxBackoff caps the wait before a retry, including one a server asks
	// for with Retry-After. 0 means DefaultSimulatorMaxBackoff.
	MaxBackoff time.Duration
	// Seed seeds the random source of the backoff jitter.
	Seed uint64
	// Temperature is the sampling temperature sent with each request; the
	// reference samples the simulator at 0, the zero value.
	Temperature float64
	// MaxTokens, when positive, is sent as max_tokens; 0 leaves the reply
	// length to the server.
	MaxTokens int
	// MaxFailures, when positive, is the number of failed calls (each
	// after its retries) after which Respond stops answering NoResponse
	// and returns an error wrapping ErrSimulatorFailing, for that call and
	// every later one, so that a run stops instead of playing on against
	// a simulator that is gone. 0: no limit (the reference's behaviour).
	MaxFailures int
	// Client sends the requests; nil means a new http.Client of its own.
	// Its Timeout, if any, applies on top of Timeout.
	Client *http.Client
}

// HTTPSimulator is a Simulator that asks a language model behind an
// OpenAI-compatible chat completions endpoint (such as a vLLM server) to
// write the human's replies, prompted with SimulatorMessages.
//
// A request that fails with a network error, a timeout, status 429 or a
// 5xx status, or whose reply is malformed (not JSON, no choices, content
// missing, empty or not a string) is retried with exponential backoff; one
// answered with any other status is not. When every attempt failed,
// Respond returns NoResponse and a nil error, counts the failure (see
// Failures) and keeps the reason (see LastError), so that one unreachable
// request does not end a run of many episodes — up to MaxFailures failed
// calls, after which it returns an error. Check, before a run, asks the
// server once and says whether it answers.
//
// An HTTPSimulator is safe for concurrent use; create it with
// NewHTTPSimulator.
type HTTPSimulator struct {
	endpoint    string
	shownURL    string // endpoint with any password hidden, for errors
	model       string
	apiKey      string
	timeout     time.Duration
	maxRetries  int
	backoff     time.Duration
	maxBackoff  time.Duration
	temperature float64
	maxTokens   int
	maxFailures int64
	client      *http.Client

	randMu sync.Mutex
	rand   *rand.Rand

	failures atomic.Int64
	retries  atomic.Int64
	errMu    sync.Mutex
	lastErr  error
}

var _ Simulator = (*HTTPSimulator)(nil)

// NewHTTPSimulator checks cfg, fills in its defaults and returns the
// simulator. It reads the API key from the environment variable cfg.APIKeyEnv
// names, if any.
func NewHTTPSimulator(cfg HTTPSimulatorConfig) (*HTTPSimulator, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("sweetrl: simulator base URL %q: %w", cfg.BaseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sweetrl: simulator base URL %q: want an absolute http or https URL such as http://localhost:8000/v1", cfg.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("sweetrl: simulator base URL %q: want no query or fragment", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("sweetrl: simulator model name is empty")
	}
	s := &HTTPSimulator{
		endpoint:    strings.TrimRight(u.String(), "/") + "/chat/completions",
		shownURL:    strings.TrimRight(u.Redacted(), "/") + "/chat/completions",
		model:       cfg.Model,
		timeout:     cfg.Timeout,
		maxRetries:  cfg.MaxRetries,
		backoff:     cfg.Backoff,
		maxBackoff:  cfg.MaxBackoff,
		temperature: cfg.Temperature,
		maxTokens:   cfg.MaxTokens,
		maxFailures: int64(cfg.MaxFailures),
		client:      cfg.Client,
		rand:        rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}
	if cfg.APIKeyEnv != "" {
		key, ok := os.LookupEnv(cfg.APIKeyEnv)
		if !ok || key == "" {
			return nil, fmt.Errorf("sweetrl: simulator API key: environment variable %s is not set", cfg.APIKeyEnv)
		}
		s.apiKey = key
	}
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("sweetrl: simulator timeout %v is negative", cfg.Timeout)
	case cfg.Timeout == 0:
		s.timeout = DefaultSimulatorTimeout
	}
	switch {
	case cfg.MaxRetries < 0:
		s.maxRetries = 0
	case cfg.MaxRetries == 0:
		s.maxRetries = DefaultSimulatorRetries
	}
	switch {
	case cfg.Backoff < 0:
		return nil, fmt.Errorf("sweetrl: simulator backoff %v is negative", cfg.Backoff)
	case cfg.Backoff == 0:
		s.backoff = DefaultSimulatorBackoff
	}
	switch {
	case cfg.MaxBackoff < 0:
		return nil, fmt.Errorf("sweetrl: simulator maximum backoff %v is negative", cfg.MaxBackoff)
	case cfg.MaxBackoff == 0:
		s.maxBackoff = DefaultSimulatorMaxBackoff
	}
	if cfg.Temperature < 0 || math.IsNaN(cfg.Temperature) || math.IsInf(cfg.Temperature, 0) {
		return nil, fmt.Errorf("sweetrl: simulator temperature %v: want a finite number ≥ 0", cfg.Temperature)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("sweetrl: simulator max tokens %d is negative", cfg.MaxTokens)
	}
	if cfg.MaxFailures < 0 {
		return nil, fmt.Errorf("sweetrl: simulator maximum failures %d is negative", cfg.MaxFailures)
	}
	if s.client == nil {
		s.client = &http.Client{}
	}
	return s, nil
}

// Failures returns the number of Respond calls that gave up and returned
// NoResponse.
func (s *HTTPSimulator) Failures() int64 { return s.failures.Load() }

// Retries returns the number of retries made so far, over all calls.
func (s *HTTPSimulator) Retries() int64 { return s.retries.Load() }

// LastError returns the error of the most recent failed attempt, whether
// or not a retry then succeeded; nil if no attempt has failed.
func (s *HTTPSimulator) LastError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.lastErr
}

// Respond implements Simulator: it sends SimulatorMessages(task, history)
// to the endpoint and returns the content of the first choice as it is.
// When every attempt failed it returns NoResponse and a nil error; when
// ctx is done it returns ctx.Err().
func (s *HTTPSimulator) Respond(ctx context.Context, task Task, history []tokenizer.Message) (string, error) {
	return s.complete(ctx, SimulatorMessages(task, history))
}

// ContentPart is one part of a chat message whose content is a list of
// parts, as OpenAI-compatible vision models take it: a text part or an
// image part.
type ContentPart struct {
	// Type is "text" or "image_url".
	Type string `json:"type"`
	// Text is the text of a "text" part.
	Text string `json:"text,omitempty"`
	// ImageURL holds the image of an "image_url" part.
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is the image of an "image_url" content part.
type ImageURL struct {
	// URL is the image's address, such as a data URL.
	URL string `json:"url"`
}

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return ContentPart{Type: "text", Text: text} }

// PNGPart returns an image content part carrying the PNG image png inline,
// as a data URL ("data:image/png;base64,…").
func PNGPart(png []byte) ContentPart {
	return ContentPart{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)}}
}

// partsMessage is a chat message whose content is a list of parts.
type partsMessage struct {
	Role    string        `json:"role"`
	Content []ContentPart `json:"content"`
}

// RespondParts sends one user message made of parts (text and images) to
// the endpoint and returns the content of the first choice as it is, with
// the same retries, failure counting and NoResponse as Respond.
func (s *HTTPSimulator) RespondParts(ctx context.Context, parts []ContentPart) (string, error) {
	return s.complete(ctx, []partsMessage{{Role: RoleUser, Content: parts}})
}

// failing returns the error of a simulator that has failed MaxFailures
// calls, or nil.
func (s *HTTPSimulator) failing() error {
	if n := s.failures.Load(); s.maxFailures > 0 && n >= s.maxFailures {
		return fmt.Errorf("sweetrl: %w: %d calls to %s failed, the most allowed; the last: %v", ErrSimulatorFailing, n, s.shownURL, s.LastError())
	}
	return nil
}

// Check sends the server one short request, once, without retries, and
// returns an error naming the endpoint unless it answers with a chat
// completion (any content, an empty one included): a run checks that its
// simulator answers before it loads a model and plays episodes. The
// request is bounded by the simulator's Timeout and by
// SimulatorCheckTimeout. It is not counted in Failures or Retries.
func (s *HTTPSimulator) Check(ctx context.Context) error {
	body, err := json.Marshal(chatRequest{
		Model:     s.model,
		Messages:  []tokenizer.Message{{Role: RoleUser, Content: "Reply with the word ready."}},
		MaxTokens: 1,
	})
	if err != nil {
		return fmt.Errorf("sweetrl: simulator check: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, min(s.timeout, SimulatorCheckTimeout))
	defer cancel()
	resp, data, err := s.send(ctx, body)
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		err = fmt.Errorf("status %s: %s", resp.Status, snippet(data))
	}
	if err == nil {
		var r chatResponse
		if jerr := json.Unmarshal(data, &r); jerr != nil || len(r.Choices) == 0 {
			err = fmt.Errorf("not a chat completion (no choices): %s", snippet(data))
		}
	}
	if err != nil {
		return fmt.Errorf("sweetrl: the simulator at %s (model %q) does not answer: %w", s.shownURL, s.model, err)
	}
	return nil
}

// complete sends messages (a slice of chat messages, marshalled as the
// request's "messages") with retries; see Respond.
func (s *HTTPSimulator) complete(ctx context.Context, messages any) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := s.failing(); err != nil {
		return "", err
	}
	body, err := json.Marshal(chatRequest{
		Model:       s.model,
		Messages:    messages,
		Temperature: s.temperature,
		MaxTokens:   s.maxTokens,
	})
	if err != nil {
		// Cannot happen for these types; reported rather than retried.
		return "", fmt.Errorf("sweetrl: simulator request: %w", err)
	}
	attempts := s.maxRetries + 1
	for attempt := 1; ; attempt++ {
		reply, retryAfter, err := s.attempt(ctx, body)
		if err == nil {
			return reply, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", ctxErr
		}
		var perm *permanentError
		permanent := errors.As(err, &perm)
		s.setLastError(fmt.Errorf("sweetrl: simulator request to %s (attempt %d of %d): %w", s.shownURL, attempt, attempts, err))
		if permanent || attempt == attempts {
			s.failures.Add(1)
			if err := s.failing(); err != nil {
				return "", err
			}
			return NoResponse, nil
		}
		s.retries.Add(1)
		if err := s.sleep(ctx, s.wait(attempt, retryAfter)); err != nil {
			return "", err
		}
	}
}

// chatRequest is the body of a chat completions request.
type chatRequest struct {
	Model       string  `json:"model"`
	Messages    any     `json:"messages"` // []tokenizer.Message or []partsMessage
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens,omitempty"`
}

// chatResponse is the part of a chat completions reply Respond reads.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// permanentError marks a failed attempt that is not to be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// attempt sends one request. It returns the reply's content, or an error
// (a *permanentError when retrying cannot help) and the wait the server
// asked for with Retry-After (0 if none).
func (s *HTTPSimulator) attempt(ctx context.Context, body []byte) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, data, err := s.send(ctx, body)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("status %s: %s", resp.Status, snippet(data))
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return "", retryAfter(resp.Header.Get("Retry-After")), err
		}
		return "", 0, &permanentError{err}
	}
	content, err := parseChatReply(data)
	return content, 0, err
}

// parseChatReply returns the content of the first choice of a chat
// completions reply, which must be a non-empty string.
func parseChatReply(data []byte) (string, error) {
	var r chatResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return "", fmt.Errorf("malformed reply: %w: %s", err, snippet(data))
	}
	if len(r.Choices) == 0 {
		if len(r.Error) > 0 && string(r.Error) != "null" {
			return "", fmt.Errorf("reply has no choices; error: %s", snippet(r.Error))
		}
		return "", errors.New("reply has no choices")
	}
	raw := r.Choices[0].Message.Content
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("reply has no content")
	}
	var content string
	if err := json.Unmarshal(raw, &content); err != nil {
		return "", fmt.Errorf("reply content is not a string: %s", snippet(raw))
	}
	if content == "" {
		return "", errors.New("reply content is empty")
	}
	return content, nil
}

// snippet returns the start of a reply body for an error message.
func snippet(data []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "(empty body)"
	}
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}

// retryAfter parses a Retry-After header given in seconds; other forms and
// absent or bad values give 0.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 1<<20)) * time.Second
}

// wait returns how long to wait before retrying after the given failed
// attempt (1 for the first): Backoff·2^(attempt-1), capped by MaxBackoff,
// its upper half drawn at random; at least the server's Retry-After, also
// capped.
func (s *HTTPSimulator) wait(attempt int, serverWait time.Duration) time.Duration {
	d := s.backoff
	for i := 1; i < attempt && d < s.maxBackoff && d <= math.MaxInt64/2; i++ {
		d *= 2
	}
	d = min(d, s.maxBackoff)
	half := d / 2
	s.randMu.Lock()
	jitter := time.Duration(s.rand.Int64N(int64(d-half) + 1))
	s.randMu.Unlock()
	d = half + jitter
	return max(d, min(serverWait, s.maxBackoff))
}

// sleep waits for d or until ctx is done, returning ctx.Err() then.
func (s *HTTPSimulator) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setLastError records err as the most recent failed attempt's error.
func (s *HTTPSimulator) setLastError(err error) {
	s.errMu.Lock()
	s.lastErr = err
	s.errMu.Unlock()
}

// send posts body to the endpoint and reads the reply, at most
// maxReplyBytes of it. A request that cannot be made is a *permanentError.
func (s *HTTPSimulator) send(ctx context.Context, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, &permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if s.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the reply: %w", err)
	}
	if len(data) > maxReplyBytes {
		return nil, nil, fmt.Errorf("reply larger than %d bytes", maxReplyBytes)
	}
	return resp, data, nil
}
