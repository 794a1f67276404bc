package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/serve"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// tinyConfig is a byte-level model small enough to decode in tests, with a
// context long enough for the simulator's prompt.
var tinyConfig = llama.Config{Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16, FFN: 64, Vocab: 258,
	NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 2048, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}

const tinyID = "tiny"

// tinyModel builds the random byte-level model (weights from seed 3).
func tinyModel(t testing.TB) *llama.Model {
	t.Helper()
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), tinyConfig, engine.F32, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newServer starts a server on m behind httptest; both are closed when the
// test ends.
func newServer(t testing.TB, m *llama.Model, cfg serve.Config) (*serve.Server, *httptest.Server) {
	t.Helper()
	cfg.Model, cfg.Tokenizer = m, tokenizer.Bytes{}
	if cfg.Models == nil {
		cfg.Models = []serve.Served{{ID: tinyID}}
	}
	s, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts
}

// reply is the part of both endpoints' replies the tests read.
type reply struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// text returns the choice's text, from either endpoint.
func (r reply) text() string {
	if r.Object == "chat.completion" {
		return r.Choices[0].Message.Content
	}
	return r.Choices[0].Text
}

func post(t testing.TB, c *http.Client, url string, body any) (int, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// complete posts a request that must succeed and returns its reply.
func complete(t testing.TB, url string, body map[string]any) reply {
	t.Helper()
	status, data := post(t, http.DefaultClient, url, body)
	if status != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", url, status, data)
	}
	var r reply
	if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("POST %s: reply %s (%v)", url, data, err)
	}
	return r
}

// streamed posts a streaming request and returns the concatenated text,
// the finish reason, the usage chunk's completion tokens (-1: none) and
// the chunks' objects.
func streamed(t testing.TB, c *http.Client, url string, body map[string]any) (text, finish string, completion int) {
	t.Helper()
	body["stream"] = true
	data, _ := json.Marshal(body)
	resp, err := c.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	completion = -1
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok || done {
			t.Fatalf("stream: unexpected line %q", line)
		}
		if payload == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(payload), &ch); err != nil {
			t.Fatalf("stream: chunk %q: %v", payload, err)
		}
		if ch.Object != "chat.completion.chunk" && ch.Object != "text_completion" {
			t.Fatalf("stream: chunk object %q", ch.Object)
		}
		if ch.Usage != nil {
			completion = ch.Usage.CompletionTokens
		}
		for _, c := range ch.Choices {
			text += c.Text + c.Delta.Content
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if !done {
		t.Fatal("stream: no [DONE]")
	}
	return text, finish, completion
}

// generate returns what Model.Generate gives for one prompt, as text, with
// the stop token dropped, and the number of tokens it generated.
func generate(t testing.TB, m *llama.Model, prompt []int32, maxNew int, sample engine.SampleParams, seed uint64) (string, int, bool) {
	t.Helper()
	g, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: maxNew, Sample: sample, Seed: seed, Stop: m.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	text, err := tokenizer.Bytes{}.Decode(g[0].Tokens)
	if err != nil {
		t.Fatal(err)
	}
	return asJSON(text), len(g[0].Tokens), g[0].Stopped
}

// asJSON returns s as a JSON string carries it: each byte of invalid UTF-8
// (which random byte-level models write) replaced by U+FFFD.
func asJSON(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		b.WriteRune(r) // RuneError for an invalid byte
		s = s[n:]
	}
	return b.String()
}

func TestModels(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{Models: []serve.Served{{ID: "base"}, {ID: "policy", Adapter: nil}}})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || l.Object != "list" || len(l.Data) != 2 || l.Data[0].ID != "base" || l.Data[1].ID != "policy" || l.Data[0].Object != "model" {
		t.Errorf("GET /v1/models: status %d, %+v", resp.StatusCode, l)
	}
}

// TestEndpointsMatchGenerate checks each endpoint's reply, text and usage,
// against Model.Generate on the prompt the endpoint should build, greedy
// and sampled with a seed.
func TestEndpointsMatchGenerate(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{})
	msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Once upon a time"}}
	chatIDs, _, err := tokenizer.EncodeChat(tokenizer.Bytes{}, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	textIDs := append([]int32{tokenizer.BytesBOS}, tokenizer.Bytes{}.Encode("Once upon a time", tokenizer.EncodeOptions{})...)
	for _, tc := range []struct {
		name   string
		path   string
		body   map[string]any
		prompt []int32
		sample engine.SampleParams
		seed   uint64
	}{
		{"chat greedy", "/v1/chat/completions", map[string]any{"messages": msgs, "temperature": 0}, chatIDs, engine.SampleParams{}, 0},
		{"chat sampled", "/v1/chat/completions", map[string]any{"messages": msgs, "temperature": 0.9, "top_p": 0.95, "seed": 11}, chatIDs, engine.SampleParams{Temperature: 0.9, TopP: 0.95}, 11},
		{"completion greedy", "/v1/completions", map[string]any{"prompt": "Once upon a time", "temperature": 0}, textIDs, engine.SampleParams{}, 0},
		{"completion ids", "/v1/completions", map[string]any{"prompt": textIDs, "temperature": 1.2, "seed": 5}, textIDs, engine.SampleParams{Temperature: 1.2, TopP: 1}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["model"], tc.body["max_tokens"] = tinyID, 24
			r := complete(t, ts.URL+tc.path, tc.body)
			want, n, stopped := generate(t, m, tc.prompt, 24, tc.sample, tc.seed)
			finish := map[bool]string{true: "stop", false: "length"}[stopped]
			if r.text() != want || r.Choices[0].FinishReason != finish {
				t.Errorf("reply %q (%s), Generate %q (%s)", r.text(), r.Choices[0].FinishReason, want, finish)
			}
			if u := r.Usage; u.PromptTokens != len(tc.prompt) || u.CompletionTokens != n || u.TotalTokens != len(tc.prompt)+n {
				t.Errorf("usage %+v; want prompt %d, completion %d", u, len(tc.prompt), n)
			}
			if r.Model != tinyID {
				t.Errorf("model %q", r.Model)
			}
		})
	}
}

// TestStreamingEqualsWhole checks that a streamed reply's chunks add up to
// the whole reply for the same seed, with the same finish reason and usage.
func TestStreamingEqualsWhole(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{})
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Tell me a story."}}}},
		{"/v1/completions", map[string]any{"prompt": "The cat"}},
	} {
		for _, temp := range []float64{0, 1} {
			for _, seed := range []int{1, 2} {
				body := func() map[string]any {
					b := map[string]any{"model": tinyID, "max_tokens": 40, "temperature": temp, "seed": seed}
					for k, v := range tc.body {
						b[k] = v
					}
					return b
				}
				whole := complete(t, ts.URL+tc.path, body())
				sb := body()
				sb["stream_options"] = map[string]bool{"include_usage": true}
				text, finish, n := streamed(t, http.DefaultClient, ts.URL+tc.path, sb)
				if text != whole.text() || finish != whole.Choices[0].FinishReason || n != whole.Usage.CompletionTokens {
					t.Errorf("%s temperature %g seed %d: stream %q (%s, %d tokens), whole %q (%s, %d tokens)",
						tc.path, temp, seed, text, finish, n, whole.text(), whole.Choices[0].FinishReason, whole.Usage.CompletionTokens)
				}
				again := complete(t, ts.URL+tc.path, body())
				if again.text() != whole.text() {
					t.Errorf("%s seed %d: two replies differ: %q, %q", tc.path, seed, whole.text(), again.text())
				}
			}
		}
	}
}

// syncBuffer is a writer safe for the handlers' log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// count returns the number of times sub occurs in the log, waiting up to
// five seconds for it to reach want: a request's line is written after its
// reply is sent.
func (s *syncBuffer) count(sub string, want int) int {
	n := strings.Count(s.String(), sub)
	for deadline := time.Now().Add(5 * time.Second); n < want && time.Now().Before(deadline); n = strings.Count(s.String(), sub) {
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// TestBatchMatchesAlone sends requests together, which the scheduler
// decodes in one running batch, and checks that each gets the
// reply it gets alone: greedy ones with different prompts and lengths, and
// sampled ones with their own seeds.
func TestBatchMatchesAlone(t *testing.T) {
	m := tinyModel(t)
	_, alone := newServer(t, m, serve.Config{MaxBatch: 1, BatchWindow: -1})
	var log syncBuffer
	_, together := newServer(t, tinyModel(t), serve.Config{MaxBatch: 8, BatchWindow: 300 * time.Millisecond, Log: &log})
	prompts := []string{"a", "Once upon a time there was", "The quick brown fox", "zz", "Lily", "x y z w"}
	for _, temp := range []float64{0, 0.8} {
		bodies := make([]map[string]any, len(prompts))
		want := make([]reply, len(prompts))
		for i, p := range prompts {
			bodies[i] = map[string]any{"model": tinyID, "prompt": p, "max_tokens": 5 + 7*i, "temperature": temp, "seed": 100 + i}
			want[i] = complete(t, alone.URL+"/v1/completions", bodies[i])
		}
		got := make([]reply, len(prompts))
		var wg sync.WaitGroup
		for i := range prompts {
			wg.Go(func() { got[i] = complete(t, together.URL+"/v1/completions", bodies[i]) })
		}
		wg.Wait()
		for i := range prompts {
			if got[i].text() != want[i].text() || got[i].Usage != want[i].Usage || got[i].Choices[0].FinishReason != want[i].Choices[0].FinishReason {
				t.Errorf("temperature %g, prompt %q: batched %q %+v, alone %q %+v", temp, prompts[i], got[i].text(), got[i].Usage, want[i].text(), want[i].Usage)
			}
		}
	}
	// One log line per request.
	if n := log.count("POST /v1/completions 200 ", 2*len(prompts)); n != 2*len(prompts) {
		t.Errorf("%d request lines, want %d; the log:\n%s", n, 2*len(prompts), log.String())
	}
}

// TestAdapterServed serves a base model and a LoRA adapter on it under two
// ids: each id's greedy reply is Model.Generate's with its adapter, the two
// differ, also when requests for both run in one batch (a forward per
// adapter in each step).
func TestAdapterServed(t *testing.T) {
	m := tinyModel(t)
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ad.Each(func(name string, w *engine.Tensor) {
		if strings.HasSuffix(name, "lora_B.weight") {
			vals := make([]float32, w.Numel())
			for i := range vals {
				vals[i] = float32(i%7-3) * 0.2
			}
			engine.SetF32(m.Backend(), w, vals)
		}
	})
	_, ts := newServer(t, m, serve.Config{Models: []serve.Served{{ID: "policy", Adapter: ad}, {ID: "base"}}, BatchWindow: 300 * time.Millisecond})
	prompt := []int32{tokenizer.BytesBOS, 'h', 'e', 'l', 'l', 'o'}
	want := map[string]string{}
	for id, a := range map[string]*llama.Adapter{"policy": ad, "base": nil} {
		g, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 16, Stop: m.Config.EOS, Adapter: a})
		if err != nil {
			t.Fatal(err)
		}
		text, _ := tokenizer.Bytes{}.Decode(g[0].Tokens)
		want[id] = asJSON(text)
	}
	if want["policy"] == want["base"] {
		t.Fatalf("the adapter changes nothing (%q): the test checks nothing", want["base"])
	}
	got := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id := range want {
		wg.Go(func() {
			r := complete(t, ts.URL+"/v1/completions", map[string]any{"model": id, "prompt": prompt, "max_tokens": 16, "temperature": 0})
			mu.Lock()
			got[id] = r.text()
			mu.Unlock()
		})
	}
	wg.Wait()
	for id := range want {
		if got[id] != want[id] {
			t.Errorf("%s: %q, want %q", id, got[id], want[id])
		}
	}
}

// TestStopStrings checks that a stop string ends the reply before it,
// streamed or not, found across token boundaries.
func TestStopStrings(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{})
	base := map[string]any{"model": tinyID, "prompt": "Once upon", "max_tokens": 40, "temperature": 0}
	full := complete(t, ts.URL+"/v1/completions", base).text()
	// The stop string: the first two printable ASCII characters in a row
	// after the start (the reply's other bytes may be invalid UTF-8).
	stop := ""
	for i := 2; i+2 <= len(full) && stop == ""; i++ {
		if c, d := full[i], full[i+1]; c >= ' ' && c < 0x7f && d >= ' ' && d < 0x7f {
			stop = full[i : i+2]
		}
	}
	if stop == "" {
		t.Skipf("the greedy reply %q has no two printable characters in a row", full)
	}
	want := full[:strings.Index(full, stop)]
	for _, stops := range []any{stop, []string{"\x00never", stop}} {
		body := map[string]any{"stop": stops}
		for k, v := range base {
			body[k] = v
		}
		r := complete(t, ts.URL+"/v1/completions", body)
		if r.text() != want || r.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: reply %q (%s), want %q (stop)", stops, r.text(), r.Choices[0].FinishReason, want)
		}
		text, finish, _ := streamed(t, http.DefaultClient, ts.URL+"/v1/completions", body)
		if text != want || finish != "stop" {
			t.Errorf("stop %q streamed: %q (%s), want %q (stop)", stops, text, finish, want)
		}
	}
}

// TestMaxTokensCapped checks that max_tokens beyond the context is capped
// at what the context leaves after the prompt.
func TestMaxTokensCapped(t *testing.T) {
	c := tinyConfig
	c.MaxSeqLen = 24
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, m, serve.Config{})
	prompt := []int32{tokenizer.BytesBOS, 'a', 'b', 'c'}
	want, n, _ := generate(t, m, prompt, 20, engine.SampleParams{}, 0)
	for _, body := range []map[string]any{
		{"model": tinyID, "prompt": prompt, "temperature": 0, "max_tokens": 1000},
		{"model": tinyID, "prompt": prompt, "temperature": 0},
	} {
		r := complete(t, ts.URL+"/v1/completions", body)
		if r.text() != want || r.Usage.CompletionTokens != n || r.Usage.CompletionTokens > 20 {
			t.Errorf("%v: %q, %d tokens; want %q, %d tokens (the context leaves 20)", body, r.text(), r.Usage.CompletionTokens, want, n)
		}
	}
	// With a default max_tokens, a request that gives none gets it.
	_, ts = newServer(t, m, serve.Config{DefaultMaxTokens: 3})
	want, n, _ = generate(t, m, prompt, 3, engine.SampleParams{}, 0)
	r := complete(t, ts.URL+"/v1/completions", map[string]any{"model": tinyID, "prompt": prompt, "temperature": 0})
	if r.text() != want || r.Usage.CompletionTokens != n {
		t.Errorf("default max_tokens 3: %q, %d tokens; want %q, %d tokens", r.text(), r.Usage.CompletionTokens, want, n)
	}
}

// TestStopStringNeverCompleted checks that text held back because it could
// begin a stop string is let out when the reply ends without it.
func TestStopStringNeverCompleted(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{})
	prompt := []int32{tokenizer.BytesBOS, 'O', 'n', 'c', 'e'}
	g, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 30, Stop: m.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	// Cut the reply after its last printable ASCII byte, and stop on that
	// byte followed by bytes the reply never writes: the byte is held
	// back, then let out at the end.
	k := 0
	for i, id := range g[0].Tokens {
		if id >= ' ' && id < 0x7f {
			k = i + 1
		}
	}
	if k == 0 {
		t.Fatalf("the greedy reply %v has no printable ASCII byte", g[0].Tokens)
	}
	raw, _ := tokenizer.Bytes{}.Decode(g[0].Tokens[:k])
	r := complete(t, ts.URL+"/v1/completions", map[string]any{"model": tinyID, "prompt": prompt, "max_tokens": k, "temperature": 0,
		"stop": raw[k-1:] + "\x01\x02"})
	if want := asJSON(raw); r.text() != want || r.Choices[0].FinishReason != "length" {
		t.Errorf("with a stop string never completed: %q (%s), want %q (length)", r.text(), r.Choices[0].FinishReason, want)
	}
}

// TestTokensBeyondTokenizer checks that a model whose vocabulary is larger
// than its tokenizer's is served: the ids the tokenizer lacks add no text.
func TestTokensBeyondTokenizer(t *testing.T) {
	c := tinyConfig
	c.Vocab = 512
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, m, serve.Config{})
	prompt := []int32{tokenizer.BytesBOS, 'h', 'i'}
	g, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 40, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, Seed: 4, Stop: m.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	var known []int32
	for _, id := range g[0].Tokens {
		if id < 258 {
			known = append(known, id)
		}
	}
	if len(known) == len(g[0].Tokens) {
		t.Fatalf("the sampled reply %v has no id beyond the tokenizer's: the test checks nothing", g[0].Tokens)
	}
	want, _ := tokenizer.Bytes{}.Decode(known)
	r := complete(t, ts.URL+"/v1/completions", map[string]any{"model": tinyID, "prompt": prompt, "max_tokens": 40, "temperature": 1, "seed": 4})
	if r.text() != asJSON(want) || r.Usage.CompletionTokens != len(g[0].Tokens) {
		t.Errorf("reply %q, %d tokens; want %q, %d tokens", r.text(), r.Usage.CompletionTokens, asJSON(want), len(g[0].Tokens))
	}
}

// TestErrors checks that bad requests get the API's error shape and
// status, and that the server still answers afterwards.
func TestErrors(t *testing.T) {
	_, ts := newServer(t, tinyModel(t), serve.Config{})
	long := strings.Repeat("x", tinyConfig.MaxSeqLen)
	chat := func(kv ...any) string {
		b := map[string]any{"model": tinyID, "messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2}
		for i := 0; i < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		data, _ := json.Marshal(b)
		return string(data)
	}
	// The messages some cases must say, in JSON's words rather than Go's.
	messages := map[string]string{
		"wrong field type":  `field "temperature": want a number, got a JSON string`,
		"max_tokens string": `field "max_tokens": want an integer, got a JSON string`,
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		typ, param, code         string
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model": "tiny", "messages": [`, 400, "invalid_request_error", "", ""},
		{"empty body", "POST", "/v1/completions", ``, 400, "invalid_request_error", "", ""},
		{"two values", "POST", "/v1/completions", `{"model":"tiny","prompt":"a"} {}`, 400, "invalid_request_error", "", ""},
		{"not an object", "POST", "/v1/completions", `[1, 2]`, 400, "invalid_request_error", "", ""},
		{"wrong field type", "POST", "/v1/chat/completions", chat("temperature", "hot"), 400, "invalid_request_error", "temperature", ""},
		{"max_tokens string", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","max_tokens":"4"}`, 400, "invalid_request_error", "max_tokens", ""},
		{"unknown model", "POST", "/v1/chat/completions", chat("model", "gpt-4"), 404, "invalid_request_error", "model", "model_not_found"},
		{"negative temperature", "POST", "/v1/chat/completions", chat("temperature", -0.5), 400, "invalid_request_error", "temperature", "invalid_value"},
		{"top_p zero", "POST", "/v1/chat/completions", chat("top_p", 0), 400, "invalid_request_error", "top_p", "invalid_value"},
		{"top_p above one", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","top_p":1.5}`, 400, "invalid_request_error", "top_p", "invalid_value"},
		{"max_tokens zero", "POST", "/v1/chat/completions", chat("max_tokens", 0), 400, "invalid_request_error", "max_tokens", "invalid_value"},
		{"max_tokens negative", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","max_tokens":-3}`, 400, "invalid_request_error", "max_tokens", "invalid_value"},
		{"max_completion_tokens zero", "POST", "/v1/chat/completions", chat("max_completion_tokens", 0), 400, "invalid_request_error", "max_completion_tokens", "invalid_value"},
		{"stop not strings", "POST", "/v1/chat/completions", chat("stop", 3), 400, "invalid_request_error", "stop", ""},
		{"stop too long", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","stop":"` + strings.Repeat("s", 600) + `"}`, 400, "invalid_request_error", "stop", ""},
		{"too many stops", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, 400, "invalid_request_error", "stop", ""},
		{"stream_options without stream", "POST", "/v1/chat/completions", chat("stream_options", map[string]bool{"include_usage": true}), 400, "invalid_request_error", "stream_options", ""},
		{"no messages", "POST", "/v1/chat/completions", chat("messages", []any{}), 400, "invalid_request_error", "messages", ""},
		{"bad role", "POST", "/v1/chat/completions", chat("messages", []map[string]string{{"role": "tool", "content": "x"}}), 400, "invalid_request_error", "messages", ""},
		{"image part", "POST", "/v1/chat/completions", chat("messages", []map[string]any{{"role": "user", "content": []map[string]string{{"type": "image_url"}}}}), 400, "invalid_request_error", "messages[0].content", ""},
		{"no prompt", "POST", "/v1/completions", `{"model":"tiny"}`, 400, "invalid_request_error", "prompt", ""},
		{"prompt of objects", "POST", "/v1/completions", `{"model":"tiny","prompt":[{}]}`, 400, "invalid_request_error", "prompt", ""},
		{"prompt id outside vocabulary", "POST", "/v1/completions", `{"model":"tiny","prompt":[1, 999]}`, 400, "invalid_request_error", "prompt", ""},
		{"prompt too long", "POST", "/v1/completions", `{"model":"tiny","prompt":"` + long + `"}`, 400, "invalid_request_error", "prompt", "context_length_exceeded"},
		{"chat too long", "POST", "/v1/chat/completions", chat("messages", []map[string]string{{"role": "user", "content": long}}), 400, "invalid_request_error", "messages", "context_length_exceeded"},
		{"GET chat", "GET", "/v1/chat/completions", ``, 405, "invalid_request_error", "", "method_not_allowed"},
		{"POST models", "POST", "/v1/models", `{}`, 405, "invalid_request_error", "", "method_not_allowed"},
		{"unknown path", "POST", "/v1/embeddings", `{}`, 404, "invalid_request_error", "", "unknown_url"},
		{"root", "GET", "/", ``, 404, "invalid_request_error", "", "unknown_url"},
		// Parameters this server does not implement are refused by name.
		{"unknown field", "POST", "/v1/chat/completions", chat("store", true), 400, "invalid_request_error", "store", "unsupported_parameter"},
		{"unknown message field", "POST", "/v1/chat/completions", chat("messages", []map[string]string{{"role": "user", "content": "x", "name": "bob"}}), 400, "invalid_request_error", "name", "unsupported_parameter"},
		{"tools", "POST", "/v1/chat/completions", chat("tools", []map[string]any{{"type": "function"}}), 400, "invalid_request_error", "tools", "unsupported_parameter"},
		{"tool_choice", "POST", "/v1/chat/completions", chat("tool_choice", "auto"), 400, "invalid_request_error", "tool_choice", "unsupported_parameter"},
		{"json mode", "POST", "/v1/chat/completions", chat("response_format", map[string]string{"type": "json_object"}), 400, "invalid_request_error", "response_format", "unsupported_parameter"},
		{"suffix", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","suffix":"z"}`, 400, "invalid_request_error", "suffix", "unsupported_parameter"},
		{"best_of above n", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","best_of":3}`, 400, "invalid_request_error", "best_of", "unsupported_parameter"},
		{"echo with top logprobs", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","echo":true,"logprobs":2}`, 400, "invalid_request_error", "logprobs", "unsupported_parameter"},
		{"n zero", "POST", "/v1/chat/completions", chat("n", 0), 400, "invalid_request_error", "n", "invalid_value"},
		{"n too many", "POST", "/v1/chat/completions", chat("n", 17), 400, "invalid_request_error", "n", "invalid_value"},
		{"top_k negative", "POST", "/v1/chat/completions", chat("top_k", -2), 400, "invalid_request_error", "top_k", "invalid_value"},
		{"presence_penalty", "POST", "/v1/chat/completions", chat("presence_penalty", 2.5), 400, "invalid_request_error", "presence_penalty", "invalid_value"},
		{"frequency_penalty", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","frequency_penalty":-3}`, 400, "invalid_request_error", "frequency_penalty", "invalid_value"},
		{"logit_bias key", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","logit_bias":{"999":1}}`, 400, "invalid_request_error", "logit_bias", "invalid_value"},
		{"logit_bias value", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","logit_bias":{"7":101}}`, 400, "invalid_request_error", "logit_bias", "invalid_value"},
		{"logprobs too many", "POST", "/v1/completions", `{"model":"tiny","prompt":"a","logprobs":21}`, 400, "invalid_request_error", "logprobs", "invalid_value"},
		{"top_logprobs alone", "POST", "/v1/chat/completions", chat("top_logprobs", 2), 400, "invalid_request_error", "top_logprobs", ""},
		{"top_logprobs too many", "POST", "/v1/chat/completions", chat("logprobs", true, "top_logprobs", 21), 400, "invalid_request_error", "top_logprobs", "invalid_value"},
		{"empty prompt in a list", "POST", "/v1/completions", `{"model":"tiny","prompt":["a",[]]}`, 400, "invalid_request_error", "prompt", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var e struct {
				Error map[string]json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("status %d, body not JSON: %s", resp.StatusCode, data)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e.Error[k]; !ok {
					t.Errorf("error has no %q: %s", k, data)
				}
			}
			str := func(k string) string {
				var s string
				json.Unmarshal(e.Error[k], &s) // null reads as ""
				return s
			}
			if resp.StatusCode != tc.status || str("type") != tc.typ || str("param") != tc.param || str("code") != tc.code || str("message") == "" {
				t.Errorf("status %d, error %s; want status %d, type %q, param %q, code %q", resp.StatusCode, data, tc.status, tc.typ, tc.param, tc.code)
			}
			if want := messages[tc.name]; want != "" && str("message") != want {
				t.Errorf("message %q, want %q", str("message"), want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
		})
	}
	// The server still answers.
	complete(t, ts.URL+"/v1/chat/completions", map[string]any{"model": tinyID, "messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 3})
}

// TestSimulatorClient has the project's own OpenAI client, the
// simulator of ColBench episodes, talk to the server: its reply is the
// server's greedy reply to the simulator's prompt.
func TestSimulatorClient(t *testing.T) {
	m := tinyModel(t)
	_, ts := newServer(t, m, serve.Config{})
	sim, err := sweetrl.NewHTTPSimulator(sweetrl.HTTPSimulatorConfig{BaseURL: ts.URL + "/v1", Model: tinyID, MaxTokens: 16, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	task := sweetrl.Task{ProblemDescription: "Write a function.", HiddenInformation: "def f(x): return x + 1"}
	history := []tokenizer.Message{{Role: sweetrl.RoleUser, Content: task.ProblemDescription}, {Role: sweetrl.RoleAssistant, Content: "What should it do?"}}
	got, err := sim.Respond(context.Background(), task, history)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := tokenizer.EncodeChat(tokenizer.Bytes{}, sweetrl.SimulatorMessages(task, history), tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := generate(t, m, ids, 16, engine.SampleParams{}, 0)
	if want == "" {
		t.Skip("the model's greedy reply is empty, which the simulator rejects")
	}
	if got != want || sim.Failures() != 0 {
		t.Errorf("simulator reply %q (failures %d, last error %v); want %q", got, sim.Failures(), sim.LastError(), want)
	}
}

// settle waits for the goroutine count to come down to at most want and
// returns the count.
func settle(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// TestNoGoroutineLeak sends a burst of requests, streamed and not, some
// abandoned mid-stream, and checks that the goroutines come back to their
// count before the burst, and before the server once it is closed.
func TestNoGoroutineLeak(t *testing.T) {
	m := tinyModel(t)
	before := runtime.NumGoroutine()
	s, err := serve.New(serve.Config{Model: m, Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: tinyID}}, MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	idle := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			body := map[string]any{"model": tinyID, "prompt": "abc", "max_tokens": 20, "temperature": 1, "seed": i}
			switch i % 3 {
			case 0:
				post(t, c, ts.URL+"/v1/completions", body)
			case 1:
				streamed(t, c, ts.URL+"/v1/completions", body)
			default: // read one chunk, then go away
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				body["stream"], body["max_tokens"] = true, 200
				data, _ := json.Marshal(body)
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", bytes.NewReader(data))
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				bufio.NewReader(resp.Body).ReadString('\n')
				cancel()
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	tr.CloseIdleConnections()
	if n := settle(idle); n > idle {
		t.Errorf("%d goroutines after the burst, %d before", n, idle)
	}
	ts.Close()
	s.Close()
	if n := settle(before); n > before {
		t.Errorf("%d goroutines after closing, %d before the server", n, before)
	}
}

// TestGracefulShutdown starts a stream, cancels the server's context, and
// checks that the stream still ends with [DONE], ListenAndServe returns
// cleanly, and the address no longer answers.
func TestGracefulShutdown(t *testing.T) {
	m := tinyModel(t)
	s, err := serve.New(serve.Config{Model: m, Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: tinyID}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve.ListenAndServe(ctx, s, "127.0.0.1:0", 30*time.Second, func(a net.Addr) { addrc <- a }, nil)
	}()
	url := "http://" + (<-addrc).String()
	body, _ := json.Marshal(map[string]any{"model": tinyID, "prompt": "abc", "max_tokens": 300, "temperature": 1, "seed": 1, "stream": true})
	rest, err := streamThenShutdown(t, url, body, cancel)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("the stream after shutdown began: %v, ends %q", err, rest[max(0, len(rest)-40):])
	}
	if err := <-errc; err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	if _, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body)); err == nil {
		t.Error("the server still answers after shutdown")
	}
}

// streamThenShutdown starts the streamed completion body on the server at
// url, waits for its first event, shuts the server down (cancel) and
// returns the rest of the stream as read until it ended.
func streamThenShutdown(t *testing.T, url string, body []byte, cancel func()) ([]byte, error) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q (%v)", line, err)
	}
	cancel()
	return io.ReadAll(r)
}
