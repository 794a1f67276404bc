package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/serve"
	"github.com/turnwise/turnwise/tokenizer"
)

// noEOS is the logit bias that bars the byte model's end-of-sequence
// token, so that a request runs to its max_tokens.
var noEOS = map[string]int{fmt.Sprint(tokenizer.BytesEOS): -100}

// TestJoinsRunningBatch starts a long streamed request, then sends short
// requests with every sampler setting, prompts prefilled in chunks of 4
// tokens: each is answered while the long one still runs (they joined its
// batch), and each gets the reply it gets alone on an idle server, which
// prefills whole prompts — the tokens of a request do not depend on what
// else runs, nor on how its prompt is chunked. The long request's own
// tokens are the same as alone too.
func TestJoinsRunningBatch(t *testing.T) {
	m := tinyModel(t)
	_, alone := newServer(t, m, serve.Config{MaxBatch: 1})
	_, busy := newServer(t, tinyModel(t), serve.Config{MaxBatch: 8, PrefillChunk: 4})
	shorts := []map[string]any{
		{"prompt": "a", "temperature": 0},
		{"prompt": "Once upon a time there was a cat", "temperature": 0.7, "top_p": 0.9, "seed": 3},
		{"prompt": "The quick brown fox", "temperature": 1, "top_k": 5, "seed": 4},
		{"prompt": "zz", "temperature": 1.2, "presence_penalty": 1.5, "frequency_penalty": 0.5, "seed": 5},
		{"prompt": "Lily", "temperature": 0.9, "logit_bias": map[string]int{"97": 5}, "seed": 6},
		{"prompt": "x y z w", "temperature": 1, "n": 2, "seed": 7},
	}
	for i, b := range shorts {
		b["model"], b["max_tokens"] = tinyID, 6+3*i
	}
	longBody := map[string]any{"model": tinyID, "prompt": "abc", "max_tokens": 1500, "temperature": 0.8, "seed": 9, "logit_bias": noEOS}

	want := make([]string, len(shorts))
	for i, b := range shorts {
		_, out := post(t, http.DefaultClient, alone.URL+"/v1/completions", b)
		want[i] = string(out)
	}
	wantLong := complete(t, alone.URL+"/v1/completions", longBody).text()

	// The long request, streamed: its first chunk says it runs.
	lb := map[string]any{"stream": true}
	for k, v := range longBody {
		lb[k] = v
	}
	data, _ := json.Marshal(lb)
	resp, err := http.Post(busy.URL+"/v1/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mu sync.Mutex
	longDone := false
	var longText strings.Builder
	first := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sc := bufio.NewScanner(resp.Body)
		n := 0
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || line == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			}
			json.Unmarshal([]byte(line), &c)
			for _, ch := range c.Choices {
				longText.WriteString(ch.Text)
			}
			if n++; n == 1 {
				close(first)
			}
		}
		mu.Lock()
		longDone = true
		mu.Unlock()
	}()
	<-first

	got := make([]string, len(shorts))
	var wg sync.WaitGroup
	for i, b := range shorts {
		wg.Go(func() {
			_, out := post(t, http.DefaultClient, busy.URL+"/v1/completions", b)
			got[i] = string(out)
		})
	}
	wg.Wait()
	mu.Lock()
	ranBeside := !longDone
	mu.Unlock()
	if !ranBeside {
		t.Error("the long request ended before the short ones were answered: they did not run beside it")
	}
	for i := range shorts {
		if strip(got[i]) != strip(want[i]) {
			t.Errorf("request %v: beside the long one %s, alone %s", shorts[i], got[i], want[i])
		}
	}
	<-finished
	if asJSON(longText.String()) != wantLong {
		t.Errorf("the long request: streamed beside others %q…, alone %q…", longText.String()[:min(40, longText.Len())], wantLong[:min(40, len(wantLong))])
	}
}

// strip removes a reply's id and creation time, which differ between
// replies.
func strip(body string) string {
	var r map[string]any
	if json.Unmarshal([]byte(body), &r) != nil {
		return body
	}
	delete(r, "id")
	delete(r, "created")
	out, _ := json.Marshal(r)
	return string(out)
}

// TestShortLatencyBesideLong is the load test of continuous batching: 50
// short requests (8 tokens, 4 clients) answered beside one long request
// (2,000 tokens) have a p99 latency under 3× theirs on an idle server. On
// busy cores a measurement is repeated before the test fails.
func TestShortLatencyBesideLong(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	s, err := serve.New(serve.Config{Model: tinyModel(t), Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: tinyID}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := serve.LoadConfig{Model: tinyID, Requests: 50, Concurrency: 4, Prompt: "Once upon a time", MaxTokens: 8, Temperature: 1}
	if _, err := serve.LoadTest(context.Background(), s, cfg); err != nil { // warms the buffer pool
		t.Fatal(err)
	}
	var ratio float64
	for try := range 3 {
		idle, err := serve.LoadTest(context.Background(), s, cfg)
		if err != nil || idle.Failed > 0 {
			t.Fatalf("idle: %v, %+v", err, idle)
		}
		bc := cfg
		bc.LongTokens = 2000
		busy, err := serve.LoadTest(context.Background(), s, bc)
		if err != nil || busy.Failed > 0 {
			t.Fatalf("beside a long request: %v, %+v", err, busy)
		}
		if !busy.LongRan {
			t.Fatalf("the long request ended (%d tokens) before the short ones were answered", busy.LongTokens)
		}
		ratio = float64(busy.P99) / float64(idle.P99)
		t.Logf("try %d: p99 %v idle, %v beside a long request (%d tokens streamed meanwhile): %.2f×; p50 %v, %v",
			try+1, idle.P99, busy.P99, busy.LongTokens, ratio, idle.P50, busy.P50)
		if ratio < 3 {
			return
		}
	}
	t.Errorf("p99 latency beside a long request is %.2f× the idle one; want under 3×", ratio)
}

// TestDefaultModel checks that a request without "model" is served by a
// server of one model, and refused naming the field by a server of two.
func TestDefaultModel(t *testing.T) {
	m := tinyModel(t)
	_, one := newServer(t, m, serve.Config{})
	r := complete(t, one.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 3})
	if r.Model != tinyID || r.Usage.CompletionTokens == 0 {
		t.Errorf("without a model: %+v", r)
	}
	_, two := newServer(t, m, serve.Config{Models: []serve.Served{{ID: "a"}, {ID: "b"}}})
	code, body := post(t, http.DefaultClient, two.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 3})
	if code != 400 || !strings.Contains(string(body), `"param":"model"`) {
		t.Errorf("without a model, two served: %d %s", code, body)
	}
}
