package serve_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/serve"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestLoadTest runs a small load test and checks its accounting: every
// request answered, tokens counted, no goroutines left behind.
func TestLoadTest(t *testing.T) {
	s, err := serve.New(serve.Config{Model: tinyModel(t), Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: tinyID}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, stream := range []bool{false, true} {
		r, err := serve.LoadTest(context.Background(), s, serve.LoadConfig{Model: tinyID, Requests: 12, Concurrency: 4, Prompt: "hi", MaxTokens: 8, Temperature: 1, Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		if r.Requests != 12 || r.Failed != 0 || r.CompletionTokens < 12 || r.CompletionTokens > 12*8 || r.P50 > r.P99 || r.P99 <= 0 {
			t.Errorf("stream %v: %+v", stream, r)
		}
		if r.GoroutinesAfter > r.GoroutinesBefore {
			t.Errorf("stream %v: %d goroutines after the load, %d before", stream, r.GoroutinesAfter, r.GoroutinesBefore)
		}
	}
	r, err := serve.LoadTest(context.Background(), s, serve.LoadConfig{Model: "nope", Requests: 2, Concurrency: 1, Prompt: "hi", MaxTokens: 8})
	if err != nil || r.Failed != 2 || r.FirstError == "" {
		t.Errorf("requests for an unknown model: %+v, %v", r, err)
	}
}

// benchLoad runs a bounded load test per iteration: 64 requests from 8
// clients, 32 tokens each at temperature 1, and reports the last run's
// requests/s, latency percentiles, and growth of goroutines and heap.
func benchLoad(b *testing.B, m *llama.Model, tok tokenizer.Tokenizer, stream bool) {
	s, err := serve.New(serve.Config{Model: m, Tokenizer: tok, Models: []serve.Served{{ID: "m"}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := serve.LoadConfig{Model: "m", Requests: 64, Concurrency: 8, Prompt: "Once upon a time", MaxTokens: 32, Temperature: 1, Stream: stream}
	// A first run fills the model's buffer pool, so that the heap figures
	// compare like with like.
	if _, err := serve.LoadTest(context.Background(), s, cfg); err != nil {
		b.Fatal(err)
	}
	var last serve.LoadResult
	for b.Loop() {
		r, err := serve.LoadTest(context.Background(), s, cfg)
		if err != nil || r.Failed > 0 {
			b.Fatalf("%v; %d failed: %s", err, r.Failed, r.FirstError)
		}
		last = r
	}
	b.ReportMetric(last.RequestsPerSec(), "req/s")
	b.ReportMetric(float64(last.P50)/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(last.P99)/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(last.GoroutinesAfter-last.GoroutinesBefore), "goroutines-grown")
	b.ReportMetric((float64(last.HeapAfter)-float64(last.HeapBefore))/1024, "heap-grown-KiB")
}

func BenchmarkLoadTiny(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(b *testing.B) {
			benchLoad(b, tinyModel(b), tokenizer.Bytes{}, stream)
		})
	}
}

func BenchmarkLoadStories260K(b *testing.B) {
	path := testdata.Path(b, "stories260K", "stories260K.gguf")
	m, err := llama.LoadGGUF(cpu.New(cpu.Options{}), path, engine.F32)
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.FromGGUFMetadata(f.Meta)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	benchLoad(b, m, tok, false)
}

// TestStories260K serves the real tiny Llama: greedy from BOS (a prompt of
// token ids) gives its documented story, and a text prompt's continuation
// is the text the whole sequence decodes to after the prompt's (the first
// token keeps its leading space).
func TestStories260K(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	m, err := llama.LoadGGUF(cpu.New(cpu.Options{}), path, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUFMetadata(f.Meta)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.New(serve.Config{Model: m, Tokenizer: tok, Models: []serve.Served{{ID: "stories260K"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer func() { ts.Close(); s.Close() }()
	const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
	r := complete(t, ts.URL+"/v1/completions", map[string]any{"model": "stories260K", "prompt": []int32{m.Config.BOS}, "max_tokens": 40, "temperature": 0})
	if !strings.HasPrefix(r.text(), story) {
		t.Errorf("greedy from BOS: %q, want %q…", r.text(), story)
	}
	prompt := append([]int32{m.Config.BOS}, tok.Encode("Lily saw", tokenizer.EncodeOptions{})...)
	g, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 12, Stop: m.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := tok.Decode(append(slices.Clone(prompt), g[0].Tokens...))
	head, _ := tok.Decode(prompt)
	r = complete(t, ts.URL+"/v1/completions", map[string]any{"model": "stories260K", "prompt": "Lily saw", "max_tokens": 12, "temperature": 0})
	if want := all[len(head):]; r.text() != want || !strings.HasPrefix(want, " ") {
		t.Errorf("continuation of %q: %q, want %q", "Lily saw", r.text(), want)
	}
}
