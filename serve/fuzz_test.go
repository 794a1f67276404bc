package serve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/serve"
)

// FuzzRequest sends arbitrary bodies to both endpoints: every reply is a
// success in the endpoint's shape or an error in the API's shape with a
// 4xx status, and the server keeps answering.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"tiny","prompt":"a","max_tokens":3}`,
		`{"model":"tiny","prompt":[256,97],"temperature":0.5,"top_p":0.5,"seed":-4,"stop":["b"]}`,
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_completion_tokens":2}`,
		`{"model":"tiny","prompt":"a","temperature":-1}`,
		`{"model":"tiny","prompt":null,"stop":7}`,
		`{"model":"tiny","messages":[{"role":"tool"}]}`,
		`{"model":"tiny","prompt":"a","max_tokens":1e400}`,
		`{"model":"tiny"`,
		`[]`,
		``,
	} {
		f.Add(seed, seed[:min(len(seed), 1)] == "{" && strings.Contains(seed, "messages"))
	}
	c := tinyConfig
	c.MaxSeqLen = 48
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 3)
	if err != nil {
		f.Fatal(err)
	}
	_, ts := newServer(f, m, serve.Config{DefaultMaxTokens: 8})
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				if !bytes.HasPrefix(data, []byte("data: {")) || !bytes.HasSuffix(data, []byte("data: [DONE]\n\n")) {
					t.Fatalf("stream %q", data)
				}
				return
			}
			var r struct {
				Choices []json.RawMessage `json:"choices"`
			}
			if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 {
				t.Fatalf("reply %q (%v)", data, err)
			}
			return
		}
		var e struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || json.Unmarshal(data, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d, body %q for %q", resp.StatusCode, data, body)
		}
	})
}
