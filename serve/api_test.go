package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/serve"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestLogprobs checks the log-probabilities of both endpoints' shapes:
// each token's is ≤ 0, its alternatives are sorted and hold the sampled
// token when greedy, streamed chunks carry the same values, and echo adds
// the prompt's tokens (the first null) before the output.
func TestLogprobs(t *testing.T) {
	_, ts := newServer(t, tinyModel(t), serve.Config{})
	var c struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	_, body := post(t, http.DefaultClient, ts.URL+"/v1/completions", map[string]any{"prompt": "abc", "max_tokens": 6, "temperature": 0, "logprobs": 3, "logit_bias": noEOS})
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("%s (%v)", body, err)
	}
	lp := c.Choices[0].Logprobs
	if len(lp.Tokens) != 6 || len(lp.TokenLogprobs) != 6 || len(lp.TopLogprobs) != 6 || len(lp.TextOffset) != 6 {
		t.Fatalf("completion logprobs: %s", body)
	}
	for i, top := range lp.TopLogprobs {
		// Greedy: the token is the most likely (alternatives whose texts
		// are alike, as invalid UTF-8 is, share a key).
		best := math.Inf(-1)
		for _, v := range top {
			best = math.Max(best, v)
		}
		if len(top) == 0 || len(top) > 3 || *lp.TokenLogprobs[i] > 0 || best > *lp.TokenLogprobs[i]+1e-6 {
			t.Errorf("token %d (greedy): logprob %v, top %v", i, *lp.TokenLogprobs[i], top)
		}
	}
	// echo with logprobs 0: the prompt's tokens first.
	_, body = post(t, http.DefaultClient, ts.URL+"/v1/completions", map[string]any{"prompt": "abc", "max_tokens": 2, "temperature": 0, "logprobs": 0, "echo": true})
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	lp = c.Choices[0].Logprobs
	if !strings.HasPrefix(c.Choices[0].Text, "abc") || len(lp.Tokens) < 5 || lp.TokenLogprobs[0] != nil || lp.TokenLogprobs[1] == nil || *lp.TokenLogprobs[1] > 0 || lp.Tokens[1] != "a" || lp.TextOffset[2] != 1 {
		t.Errorf("echo: %s", body)
	}

	// Chat: logprobs true, top_logprobs 2; the stream's chunks carry the
	// same log-probabilities as the whole reply.
	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 5, "temperature": 0.8, "seed": 2, "logprobs": true, "top_logprobs": 2, "logit_bias": noEOS}
	var whole struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float64 `json:"logprob"`
					Bytes       []int   `json:"bytes"`
					TopLogprobs []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	_, body = post(t, http.DefaultClient, ts.URL+"/v1/chat/completions", req)
	if err := json.Unmarshal(body, &whole); err != nil || len(whole.Choices) != 1 || len(whole.Choices[0].Logprobs.Content) != 5 {
		t.Fatalf("chat logprobs: %s (%v)", body, err)
	}
	for _, e := range whole.Choices[0].Logprobs.Content {
		if len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Logprob < e.TopLogprobs[1].Logprob || e.Logprob > e.TopLogprobs[0].Logprob || len(e.Bytes) != len(e.Token) && !strings.ContainsRune(e.Token, '\uFFFD') {
			t.Errorf("chat token %+v", e)
		}
	}
	req["stream"] = true
	data, _ := json.Marshal(req)
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var streamedLP []float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Logprobs *struct {
					Content []struct {
						Logprob float64 `json:"logprob"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(line), &chunk)
		for _, ch := range chunk.Choices {
			if ch.Logprobs != nil {
				for _, e := range ch.Logprobs.Content {
					streamedLP = append(streamedLP, e.Logprob)
				}
			}
		}
	}
	if len(streamedLP) != 5 {
		t.Fatalf("streamed %d log-probabilities, want 5", len(streamedLP))
	}
	for i, v := range streamedLP {
		if v != whole.Choices[0].Logprobs.Content[i].Logprob {
			t.Errorf("token %d: streamed %v, whole %v", i, v, whole.Choices[0].Logprobs.Content[i].Logprob)
		}
	}
}

// TestChoicesAndPrompts checks n > 1 (choice k seeded with seed + k) and a
// list of prompts (choice i continues prompt i/n), whole and streamed.
func TestChoicesAndPrompts(t *testing.T) {
	_, ts := newServer(t, tinyModel(t), serve.Config{})
	one := func(prompt any, seed int) string {
		return complete(t, ts.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 1, "seed": seed}).text()
	}
	prompts := []any{"ab", []int32{1, 'x', 'y'}}
	var r struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	_, body := post(t, http.DefaultClient, ts.URL+"/v1/completions", map[string]any{"prompt": prompts, "n": 2, "max_tokens": 6, "temperature": 1, "seed": 10})
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 4 {
		t.Fatalf("%s (%v)", body, err)
	}
	for i, c := range r.Choices {
		if want := one(prompts[i/2], 10+i%2); c.Index != i || c.Text != want {
			t.Errorf("choice %d: %q, want %q", i, c.Text, want)
		}
	}
	if r.Usage.PromptTokens != 3+3 {
		t.Errorf("usage %+v, want 6 prompt tokens", r.Usage)
	}
	if r.Choices[0].Text == r.Choices[1].Text {
		t.Errorf("two choices of one prompt are the same: %q", r.Choices[0].Text)
	}
	// Streamed, the chunks of each index add up to that choice.
	text, _, _ := streamedChoices(t, ts.URL+"/v1/completions", map[string]any{"prompt": prompts, "n": 2, "max_tokens": 6, "temperature": 1, "seed": 10})
	for i, c := range r.Choices {
		if text[i] != c.Text {
			t.Errorf("streamed choice %d: %q, whole %q", i, text[i], c.Text)
		}
	}
}

// streamedChoices reads a stream and returns each choice's text.
func streamedChoices(t *testing.T, url string, body map[string]any) (map[int]string, int, bool) {
	t.Helper()
	body["stream"] = true
	data, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text := map[int]string{}
	chunks, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Index int    `json:"index"`
				Text  string `json:"text"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(line), &c)
		for _, ch := range c.Choices {
			text[ch.Index] += ch.Text
		}
		chunks++
	}
	return text, chunks, done
}

// TestSamplingParameters checks that top_k 1 is greedy, that a logit bias
// of 100 forces its token, and that a presence penalty changes a sampled
// reply.
func TestSamplingParameters(t *testing.T) {
	_, ts := newServer(t, tinyModel(t), serve.Config{})
	base := func(kv ...any) map[string]any {
		b := map[string]any{"prompt": "hello", "max_tokens": 12, "temperature": 1, "seed": 1, "logit_bias": noEOS}
		for i := 0; i < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		return b
	}
	greedy := complete(t, ts.URL+"/v1/completions", base("temperature", 0)).text()
	if got := complete(t, ts.URL+"/v1/completions", base("top_k", 1, "seed", 99)).text(); got != greedy {
		t.Errorf("top_k 1: %q, greedy %q", got, greedy)
	}
	if got := complete(t, ts.URL+"/v1/completions", base("logit_bias", map[string]int{"113": 100})).text(); got != strings.Repeat("q", 12) {
		t.Errorf("logit_bias q +100: %q", got)
	}
	plain := complete(t, ts.URL+"/v1/completions", base()).text()
	if got := complete(t, ts.URL+"/v1/completions", base("presence_penalty", 2, "frequency_penalty", 2)).text(); got == plain {
		t.Errorf("the penalties change nothing: %q", got)
	}
}

// TestHealthMetricsAuth checks /health, the metrics after a request, and
// the API key: /v1 refused without it (401, the API's error shape),
// /health open.
func TestHealthMetricsAuth(t *testing.T) {
	_, ts := newServer(t, tinyModel(t), serve.Config{APIKey: "sesame"})
	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/health", ""); code != 200 {
		t.Errorf("/health: %d", code)
	}
	if code, body := get("/v1/models", ""); code != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) {
		t.Errorf("no key: %d %s", code, body)
	}
	if code, _ := get("/v1/models", "wrong"); code != 401 {
		t.Errorf("wrong key: %d", code)
	}
	if code, _ := get("/v1/models", "sesame"); code != 200 {
		t.Errorf("right key: %d", code)
	}
	data, _ := json.Marshal(map[string]any{"prompt": "hi", "max_tokens": 4, "logit_bias": noEOS})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/completions", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer sesame")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %v %v", err, resp)
	}
	resp.Body.Close()
	_, m := get("/metrics", "")
	for _, want := range []string{
		`turnwise_requests_total{status="200"} 3`, `turnwise_requests_total{status="401"} 2`,
		"turnwise_prompt_tokens_total 3", "turnwise_generation_tokens_total 4",
		"# TYPE turnwise_time_to_first_token_seconds histogram", `turnwise_time_to_first_token_seconds_bucket{le="+Inf"} 1`,
		`turnwise_request_latency_seconds_bucket{le="+Inf"} 5`, "turnwise_queue_depth 0", "turnwise_running_batch_size ",
		"turnwise_generation_tokens_per_second 0.4",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
}

// TestStreamCutAtGrace checks that a stream still running when the
// shutdown's grace period ends gets an error event, then [DONE].
func TestStreamCutAtGrace(t *testing.T) {
	s, err := serve.New(serve.Config{Model: tinyModel(t), Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: tinyID}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve.ListenAndServe(ctx, s, "127.0.0.1:0", 50*time.Millisecond, func(a net.Addr) { addrc <- a }, nil)
	}()
	url := "http://" + (<-addrc).String()
	body, _ := json.Marshal(map[string]any{"prompt": "abc", "max_tokens": 2000, "stream": true, "logit_bias": noEOS})
	rest, _ := streamThenShutdown(t, url, body, cancel)
	tail := string(rest[max(0, len(rest)-300):])
	if !strings.HasSuffix(tail, "data: [DONE]\n\n") || !strings.Contains(tail, `"error":{"message":"the server is shutting down: the grace period ended"`) {
		t.Errorf("the stream's end: %q", tail)
	}
	if err := <-errc; err == nil {
		t.Error("ListenAndServe: no error for a shutdown past its grace period")
	}
}

// TestChatTemplate checks which chat templates are honoured: none and the
// Llama 3.1 one; another (ChatML's shape) makes chat requests 400 while
// completions are served, and ReadChatTemplate reads the file's field.
func TestChatTemplate(t *testing.T) {
	const chatML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{{"", true}, {tokenizer.ChatTemplate, true}, {chatML, false}} {
		if err := serve.CheckChatTemplate(tc.tmpl); (err == nil) != tc.ok {
			t.Errorf("template %.30q: %v, want ok %v", tc.tmpl, err, tc.ok)
		}
	}
	dir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"chat_template": []map[string]string{{"name": "tool_use", "template": "x"}, {"name": "default", "template": chatML}}})
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := serve.ReadChatTemplate(dir); err != nil || got != chatML {
		t.Errorf("ReadChatTemplate: %q, %v", got, err)
	}
	if got, err := serve.ReadChatTemplate(t.TempDir()); err != nil || got != "" {
		t.Errorf("ReadChatTemplate without the file: %q, %v", got, err)
	}
	_, ts := newServer(t, tinyModel(t), serve.Config{ChatTemplate: chatML})
	code, body := post(t, http.DefaultClient, ts.URL+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2})
	if code != 400 || !strings.Contains(string(body), "unsupported_chat_template") {
		t.Errorf("chat with a ChatML template: %d %s", code, body)
	}
	complete(t, ts.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 2})
}
