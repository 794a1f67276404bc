package sweetrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnwise/turnwise/tokenizer"
)

// simTask and simHistory are the task and dialogue the HTTP simulator
// tests send.
var (
	simTask = Task{
		ProblemDescription: "I need a function. The signature of the function is: def f(x)",
		HiddenInformation:  "def f(x):\n    return 2 * x",
	}
	simHistory = []tokenizer.Message{
		{Role: RoleUser, Content: simTask.ProblemDescription},
		{Role: RoleAssistant, Content: " What does f return?"},
	}
)

// okBody returns a chat completions reply whose first choice says content.
func okBody(content string) string {
	b, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
	})
	return string(b)
}

// reply is one scripted server answer.
type reply struct {
	status int
	body   string
	header map[string]string
	// sleep delays the answer, ending early if the client gives up.
	sleep time.Duration
	// hangUp closes the connection without answering.
	hangUp bool
}

// scriptServer answers the n-th request with script[n], repeating the last
// entry once the script runs out, and counts the requests.
type scriptServer struct {
	*httptest.Server
	requests atomic.Int64
}

func newScriptServer(t *testing.T, script ...reply) *scriptServer {
	t.Helper()
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.requests.Add(1)) - 1
		rep := script[min(n, len(script)-1)]
		// Reading the whole request lets the server notice a client
		// that hangs up, which ends r.Context().
		io.Copy(io.Discard, r.Body)
		if rep.sleep > 0 {
			select {
			case <-time.After(rep.sleep):
			case <-r.Context().Done():
				return
			}
		}
		if rep.hangUp {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(s.Close)
	return s
}

// fastConfig returns a configuration for url with millisecond-scale
// timeouts and backoff.
func fastConfig(url string) HTTPSimulatorConfig {
	return HTTPSimulatorConfig{
		BaseURL:    url + "/v1",
		Model:      "sim-model",
		Timeout:    time.Second,
		MaxRetries: 3,
		Backoff:    time.Millisecond,
		MaxBackoff: 4 * time.Millisecond,
		Seed:       1,
	}
}

func newSim(t *testing.T, cfg HTTPSimulatorConfig) *HTTPSimulator {
	t.Helper()
	s, err := NewHTTPSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHTTPSimulatorRequest(t *testing.T) {
	tests := []struct {
		name      string
		key       string // value of the API key variable; "" leaves APIKeyEnv empty
		maxTokens int
		baseURL   string // appended to the server's URL
	}{
		{name: "no key", baseURL: "/v1"},
		{name: "key", key: "sk-test-123", baseURL: "/v1"},
		{name: "max tokens and trailing slash", maxTokens: 256, baseURL: "/v1/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				gotPath, gotAuth, gotType string
				gotBody                   []byte
				gotMethod                 string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotMethod, gotPath = r.Method, r.URL.Path
				gotAuth, gotType = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
				gotBody, _ = io.ReadAll(r.Body)
				io.WriteString(w, okBody("  It doubles x. "))
			}))
			defer srv.Close()
			cfg := fastConfig(srv.URL)
			cfg.BaseURL = srv.URL + tc.baseURL
			cfg.MaxTokens = tc.maxTokens
			if tc.key != "" {
				t.Setenv("TURNWISE_TEST_SIM_KEY", tc.key)
				cfg.APIKeyEnv = "TURNWISE_TEST_SIM_KEY"
			}
			sim := newSim(t, cfg)
			got, err := sim.Respond(context.Background(), simTask, simHistory)
			if err != nil {
				t.Fatal(err)
			}
			if got != "  It doubles x. " {
				t.Errorf("reply %q, want the content as it is", got)
			}
			if gotMethod != http.MethodPost || gotPath != "/v1/chat/completions" {
				t.Errorf("request %s %s, want POST /v1/chat/completions", gotMethod, gotPath)
			}
			if gotType != "application/json" {
				t.Errorf("Content-Type %q", gotType)
			}
			wantAuth := ""
			if tc.key != "" {
				wantAuth = "Bearer " + tc.key
			}
			if gotAuth != wantAuth {
				t.Errorf("Authorization %q, want %q", gotAuth, wantAuth)
			}

			var fields map[string]json.RawMessage
			if err := json.Unmarshal(gotBody, &fields); err != nil {
				t.Fatalf("request body %s: %v", gotBody, err)
			}
			if string(fields["model"]) != `"sim-model"` {
				t.Errorf("model %s", fields["model"])
			}
			if string(fields["temperature"]) != "0" {
				t.Errorf("temperature %s, want 0 sent explicitly", fields["temperature"])
			}
			if mt, ok := fields["max_tokens"]; tc.maxTokens == 0 && ok {
				t.Errorf("max_tokens %s sent, want none", mt)
			} else if tc.maxTokens != 0 && string(mt) != fmt.Sprint(tc.maxTokens) {
				t.Errorf("max_tokens %s, want %d", mt, tc.maxTokens)
			}
			var msgs []tokenizer.Message
			if err := json.Unmarshal(fields["messages"], &msgs); err != nil {
				t.Fatal(err)
			}
			want := []tokenizer.Message{
				{Role: "system", Content: SimulatorInstructions + "\n\nHidden information:\n" + simTask.HiddenInformation},
				{Role: "assistant", Content: simTask.ProblemDescription},
				{Role: "user", Content: " What does f return?"},
			}
			if !reflect.DeepEqual(msgs, want) {
				t.Errorf("messages\n got %q\nwant %q", msgs, want)
			}
			if sim.Failures() != 0 || sim.Retries() != 0 || sim.LastError() != nil {
				t.Errorf("failures %d, retries %d, last error %v; want none", sim.Failures(), sim.Retries(), sim.LastError())
			}
		})
	}
}

func TestHTTPSimulatorRetries(t *testing.T) {
	ok := reply{status: 200, body: okBody("fine")}
	status := func(code int) reply { return reply{status: code, body: `{"error": {"message": "nope"}}`} }
	body := func(b string) reply { return reply{status: 200, body: b} }
	tests := []struct {
		name         string
		script       []reply
		maxRetries   int
		want         string
		wantRequests int64
		wantFailures int64
		wantErr      string // in LastError; "" means no error
	}{
		{name: "success", script: []reply{ok}, want: "fine", wantRequests: 1},
		{name: "500 then success", script: []reply{status(500), ok}, want: "fine", wantRequests: 2, wantErr: "500"},
		{name: "503 502 then success", script: []reply{status(503), status(502), ok}, want: "fine", wantRequests: 3, wantErr: "502"},
		{name: "429 then success", script: []reply{status(429), ok}, want: "fine", wantRequests: 2, wantErr: "429"},
		{
			name:   "429 with a long Retry-After is capped",
			script: []reply{{status: 429, header: map[string]string{"Retry-After": "3600"}}, ok},
			want:   "fine", wantRequests: 2, wantErr: "429",
		},
		{name: "500 every time", script: []reply{status(500)}, want: NoResponse, wantRequests: 4, wantFailures: 1, wantErr: "attempt 4 of 4"},
		{name: "500 with two retries", script: []reply{status(500)}, maxRetries: 2, want: NoResponse, wantRequests: 3, wantFailures: 1, wantErr: "attempt 3 of 3"},
		{name: "500 with no retries", script: []reply{status(500), ok}, maxRetries: -1, want: NoResponse, wantRequests: 1, wantFailures: 1, wantErr: "500"},
		{name: "400 is not retried", script: []reply{status(400), ok}, want: NoResponse, wantRequests: 1, wantFailures: 1, wantErr: "400 Bad Request"},
		{name: "401 is not retried", script: []reply{status(401), ok}, want: NoResponse, wantRequests: 1, wantFailures: 1, wantErr: "401"},
		{name: "404 is not retried", script: []reply{status(404), ok}, want: NoResponse, wantRequests: 1, wantFailures: 1, wantErr: "nope"},
		{name: "malformed JSON then success", script: []reply{body(`{"choices": [`), ok}, want: "fine", wantRequests: 2, wantErr: "malformed"},
		{name: "not JSON then success", script: []reply{body(`<html>gateway</html>`), ok}, want: "fine", wantRequests: 2, wantErr: "malformed"},
		{name: "no choices then success", script: []reply{body(`{"choices": []}`), ok}, want: "fine", wantRequests: 2, wantErr: "no choices"},
		{name: "error object", script: []reply{body(`{"error": {"message": "overloaded"}}`), ok}, want: "fine", wantRequests: 2, wantErr: "overloaded"},
		{name: "empty content", script: []reply{body(okBody("")), ok}, want: "fine", wantRequests: 2, wantErr: "content is empty"},
		{name: "null content", script: []reply{body(`{"choices": [{"message": {"content": null}}]}`), ok}, want: "fine", wantRequests: 2, wantErr: "no content"},
		{name: "missing message", script: []reply{body(`{"choices": [{}]}`), ok}, want: "fine", wantRequests: 2, wantErr: "no content"},
		{name: "content not a string", script: []reply{body(`{"choices": [{"message": {"content": [{"type": "text"}]}}]}`), ok}, want: "fine", wantRequests: 2, wantErr: "not a string"},
		{name: "malformed every time", script: []reply{body(`{}`)}, want: NoResponse, wantRequests: 4, wantFailures: 1, wantErr: "no choices"},
		{name: "connection dropped then success", script: []reply{{hangUp: true}, ok}, want: "fine", wantRequests: 2, wantErr: "EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script...)
			cfg := fastConfig(srv.URL)
			if tc.maxRetries != 0 {
				cfg.MaxRetries = tc.maxRetries
			}
			sim := newSim(t, cfg)
			start := time.Now()
			got, err := sim.Respond(context.Background(), simTask, simHistory)
			if err != nil {
				t.Fatalf("Respond: %v", err)
			}
			if got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
			if n := srv.requests.Load(); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if n := sim.Retries(); n != tc.wantRequests-1 {
				t.Errorf("%d retries, want %d", n, tc.wantRequests-1)
			}
			if n := sim.Failures(); n != tc.wantFailures {
				t.Errorf("%d failures, want %d", n, tc.wantFailures)
			}
			switch err := sim.LastError(); {
			case tc.wantErr == "" && err != nil:
				t.Errorf("last error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("last error %v, want one mentioning %q", err, tc.wantErr)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestHTTPSimulatorTimeout(t *testing.T) {
	slow := reply{status: 200, body: okBody("late"), sleep: 5 * time.Second}
	tests := []struct {
		name         string
		script       []reply
		want         string
		wantRequests int64
		wantFailures int64
	}{
		{name: "slow then fast", script: []reply{slow, {status: 200, body: okBody("fast")}}, want: "fast", wantRequests: 2},
		{name: "slow every time", script: []reply{slow}, want: NoResponse, wantRequests: 3, wantFailures: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script...)
			cfg := fastConfig(srv.URL)
			cfg.Timeout = 20 * time.Millisecond
			cfg.MaxRetries = 2
			sim := newSim(t, cfg)
			start := time.Now()
			got, err := sim.Respond(context.Background(), simTask, simHistory)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: the per-request timeout was not applied", d)
			}
			if got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
			if n := srv.requests.Load(); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if n := sim.Failures(); n != tc.wantFailures {
				t.Errorf("%d failures, want %d", n, tc.wantFailures)
			}
			if err := sim.LastError(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("last error %v, want a deadline", err)
			}
		})
	}
}

func TestHTTPSimulatorUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	sim := newSim(t, fastConfig(strings.Replace(url, "://", "://user:hunter2@", 1)))
	got, err := sim.Respond(context.Background(), simTask, simHistory)
	if err != nil || got != NoResponse {
		t.Fatalf("Respond = %q, %v; want NoResponse", got, err)
	}
	if sim.Failures() != 1 || sim.Retries() != 3 {
		t.Errorf("failures %d, retries %d; want 1, 3", sim.Failures(), sim.Retries())
	}
	if err := sim.LastError(); err == nil || !strings.Contains(err.Error(), "/v1/chat/completions") {
		t.Errorf("last error %v, want one naming the endpoint", err)
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("last error %v shows the URL's password", err)
	}
}

func TestHTTPSimulatorContext(t *testing.T) {
	tests := []struct {
		name string
		// script is what the server answers; cfg adjusts fastConfig.
		script []reply
		cfg    func(*HTTPSimulatorConfig)
		// ctx returns the context to call with, and arranges its end.
		ctx     func(srv *scriptServer) (context.Context, context.CancelFunc)
		wantErr error
		maxReqs int64
	}{
		{
			name:   "cancelled before the call",
			script: []reply{{status: 200, body: okBody("x")}},
			ctx: func(*scriptServer) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			wantErr: context.Canceled,
			maxReqs: 0,
		},
		{
			name:   "cancelled during a request",
			script: []reply{{status: 200, body: okBody("x"), sleep: 5 * time.Second}},
			ctx: func(srv *scriptServer) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					for srv.requests.Load() == 0 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
				return ctx, cancel
			},
			wantErr: context.Canceled,
			maxReqs: 1,
		},
		{
			name:   "cancelled during the backoff",
			script: []reply{{status: 500}},
			cfg: func(c *HTTPSimulatorConfig) {
				c.Backoff, c.MaxBackoff = time.Hour, time.Hour
			},
			ctx: func(srv *scriptServer) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					for srv.requests.Load() == 0 {
						time.Sleep(time.Millisecond)
					}
					time.Sleep(10 * time.Millisecond)
					cancel()
				}()
				return ctx, cancel
			},
			wantErr: context.Canceled,
			maxReqs: 1,
		},
		{
			name:   "deadline of the caller",
			script: []reply{{status: 200, body: okBody("x"), sleep: 5 * time.Second}},
			ctx: func(*scriptServer) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
			maxReqs: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script...)
			cfg := fastConfig(srv.URL)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			sim := newSim(t, cfg)
			ctx, cancel := tc.ctx(srv)
			defer cancel()
			start := time.Now()
			got, err := sim.Respond(ctx, simTask, simHistory)
			if !errors.Is(err, tc.wantErr) || got != "" {
				t.Errorf("Respond = %q, %v; want \"\", %v", got, err, tc.wantErr)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if n := srv.requests.Load(); n > tc.maxReqs {
				t.Errorf("%d requests, want at most %d", n, tc.maxReqs)
			}
			if sim.Failures() != 0 {
				t.Errorf("%d failures counted for a cancelled call", sim.Failures())
			}
		})
	}
}

// TestHTTPSimulatorConcurrent runs many calls at once, some of which the
// server refuses, and checks the replies and the failure count.
func TestHTTPSimulatorConcurrent(t *testing.T) {
	var flaky sync.Map // the flaky calls seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []tokenizer.Message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		last := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.HasPrefix(last, "refuse"):
			w.WriteHeader(http.StatusUnprocessableEntity)
		case strings.HasPrefix(last, "flaky"):
			if _, seen := flaky.LoadOrStore(last, true); !seen {
				w.WriteHeader(http.StatusServiceUnavailable) // the first attempt only
				return
			}
			io.WriteString(w, okBody("re: "+last))
		case strings.HasPrefix(last, "broken"):
			w.WriteHeader(http.StatusInternalServerError)
		default:
			io.WriteString(w, okBody("re: "+last))
		}
	}))
	defer srv.Close()
	cfg := fastConfig(srv.URL)
	cfg.MaxRetries = 2
	sim := newSim(t, cfg)

	const n = 60
	kinds := []string{"ok", "refuse", "flaky", "broken"}
	replies := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			history := []tokenizer.Message{
				{Role: RoleUser, Content: "p"},
				{Role: RoleAssistant, Content: fmt.Sprintf("%s %d", kinds[i%len(kinds)], i)},
			}
			replies[i], errs[i] = sim.Respond(context.Background(), simTask, history)
		}()
	}
	wg.Wait()
	var wantFailures int64
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		want := fmt.Sprintf("re: %s %d", kinds[i%len(kinds)], i)
		switch kinds[i%len(kinds)] {
		case "refuse", "broken":
			want = NoResponse
			wantFailures++
		}
		if replies[i] != want {
			t.Errorf("call %d: reply %q, want %q", i, replies[i], want)
		}
	}
	if got := sim.Failures(); got != wantFailures {
		t.Errorf("%d failures, want %d", got, wantFailures)
	}
	// Each broken call is retried twice, each flaky call once.
	if got, want := sim.Retries(), int64(2*n/len(kinds)+n/len(kinds)); got != want {
		t.Errorf("%d retries, want %d", got, want)
	}
	if sim.LastError() == nil {
		t.Error("no last error")
	}
}

// TestHTTPSimulatorEpisode plays an episode against the HTTP simulator and
// checks that its long replies are cut by the episode.
func TestHTTPSimulatorEpisode(t *testing.T) {
	long := strings.Repeat("ab", 300)
	srv := newScriptServer(t, reply{status: 200, body: okBody(long)})
	sim := newSim(t, fastConfig(srv.URL))
	agent := &scriptedAgent{replies: []string{"OUTPUT: Which x?", "I WANT TO ANSWER: def f(x): return 2 * x"}}
	tr, err := RunEpisode(context.Background(), simTask, agent, sim)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.DialogueHistory) != 4 {
		t.Fatalf("%d turns, want 4", len(tr.DialogueHistory))
	}
	if got := tr.DialogueHistory[2].Content; got != long[:SimulatorReplyLimit] {
		t.Errorf("human turn of %d characters, want the reply cut to %d", len(got), SimulatorReplyLimit)
	}
}

func TestNewHTTPSimulatorErrors(t *testing.T) {
	t.Setenv("TURNWISE_TEST_EMPTY_KEY", "")
	base := HTTPSimulatorConfig{BaseURL: "http://localhost:8000/v1", Model: "m"}
	tests := []struct {
		name    string
		edit    func(*HTTPSimulatorConfig)
		wantErr string
	}{
		{"empty URL", func(c *HTTPSimulatorConfig) { c.BaseURL = "" }, "absolute http or https URL"},
		{"no scheme", func(c *HTTPSimulatorConfig) { c.BaseURL = "localhost:8000/v1" }, "absolute http or https URL"},
		{"other scheme", func(c *HTTPSimulatorConfig) { c.BaseURL = "ftp://localhost/v1" }, "absolute http or https URL"},
		{"no host", func(c *HTTPSimulatorConfig) { c.BaseURL = "http:///v1" }, "absolute http or https URL"},
		{"unparsable", func(c *HTTPSimulatorConfig) { c.BaseURL = "http://[::1/v1" }, "base URL"},
		{"control character", func(c *HTTPSimulatorConfig) { c.BaseURL = "http://host/\x7f" }, "base URL"},
		{"query", func(c *HTTPSimulatorConfig) { c.BaseURL = "http://host/v1?x=1" }, "no query"},
		{"empty model", func(c *HTTPSimulatorConfig) { c.Model = " " }, "model name is empty"},
		{"unset key variable", func(c *HTTPSimulatorConfig) { c.APIKeyEnv = "TURNWISE_TEST_UNSET_KEY_VARIABLE" }, "TURNWISE_TEST_UNSET_KEY_VARIABLE is not set"},
		{"empty key variable", func(c *HTTPSimulatorConfig) { c.APIKeyEnv = "TURNWISE_TEST_EMPTY_KEY" }, "TURNWISE_TEST_EMPTY_KEY is not set"},
		{"negative timeout", func(c *HTTPSimulatorConfig) { c.Timeout = -time.Second }, "timeout"},
		{"negative backoff", func(c *HTTPSimulatorConfig) { c.Backoff = -1 }, "backoff"},
		{"negative maximum backoff", func(c *HTTPSimulatorConfig) { c.MaxBackoff = -1 }, "maximum backoff"},
		{"negative temperature", func(c *HTTPSimulatorConfig) { c.Temperature = -0.5 }, "temperature"},
		{"NaN temperature", func(c *HTTPSimulatorConfig) { c.Temperature = nan() }, "temperature"},
		{"negative max tokens", func(c *HTTPSimulatorConfig) { c.MaxTokens = -1 }, "max tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			sim, err := NewHTTPSimulator(cfg)
			if err == nil || sim != nil {
				t.Fatalf("NewHTTPSimulator = %v, %v; want an error", sim, err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewHTTPSimulatorDefaults(t *testing.T) {
	sim := newSim(t, HTTPSimulatorConfig{BaseURL: "https://api.example.com/v1/", Model: "m"})
	if sim.endpoint != "https://api.example.com/v1/chat/completions" {
		t.Errorf("endpoint %q", sim.endpoint)
	}
	if sim.timeout != DefaultSimulatorTimeout || sim.maxRetries != DefaultSimulatorRetries ||
		sim.backoff != DefaultSimulatorBackoff || sim.maxBackoff != DefaultSimulatorMaxBackoff {
		t.Errorf("defaults: timeout %v, retries %d, backoff %v, max backoff %v",
			sim.timeout, sim.maxRetries, sim.backoff, sim.maxBackoff)
	}
	if sim.client == nil || sim.client == http.DefaultClient {
		t.Error("want a client of its own")
	}
	if sim.temperature != 0 || sim.apiKey != "" {
		t.Errorf("temperature %v, key %q", sim.temperature, sim.apiKey)
	}
}

func TestHTTPSimulatorBackoff(t *testing.T) {
	cfg := HTTPSimulatorConfig{
		BaseURL: "http://localhost/v1", Model: "m",
		Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Seed: 7,
	}
	a, b := newSim(t, cfg), newSim(t, cfg)
	tests := []struct {
		attempt    int
		serverWait time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 0, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 0, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 0, 500 * time.Millisecond, time.Second},
		{60, 0, 500 * time.Millisecond, time.Second},
		{1, 700 * time.Millisecond, 700 * time.Millisecond, 700 * time.Millisecond},
		{1, time.Hour, time.Second, time.Second},
	}
	for _, tc := range tests {
		for range 20 {
			da, db := a.wait(tc.attempt, tc.serverWait), b.wait(tc.attempt, tc.serverWait)
			if da != db {
				t.Errorf("attempt %d: waits %v and %v from the same seed", tc.attempt, da, db)
			}
			if da < tc.lo || da > tc.hi {
				t.Errorf("attempt %d, server wait %v: wait %v outside [%v, %v]", tc.attempt, tc.serverWait, da, tc.lo, tc.hi)
			}
		}
	}
	// A huge cap must not overflow the doubling.
	cfg.MaxBackoff = time.Duration(1<<63 - 1)
	c := newSim(t, cfg)
	if d := c.wait(200, 0); d <= 0 {
		t.Errorf("wait %v with a huge cap", d)
	}
}

// TestRespondPartsBody checks the request RespondParts sends: one user
// message whose content is the parts in order, a PNG as a base64 data URL.
func TestRespondPartsBody(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding the request: %v", err)
		}
		io.WriteString(w, okBody("Make the header green."))
	}))
	defer srv.Close()
	sim, err := NewHTTPSimulator(HTTPSimulatorConfig{BaseURL: srv.URL, Model: "vision"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sim.RespondParts(context.Background(), []ContentPart{TextPart("compare"), PNGPart([]byte{0x89, 'P', 'N', 'G'})})
	if err != nil || reply != "Make the header green." {
		t.Fatalf("RespondParts = %q, %v", reply, err)
	}
	want := []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "compare"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw=="}},
	}}}
	if !reflect.DeepEqual(got["messages"], want) {
		t.Errorf("messages = %v, want %v", got["messages"], want)
	}
}
