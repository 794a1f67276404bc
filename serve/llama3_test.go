package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestLlama3Chat serves a tiny random model with the Llama 3 tokenizer: a
// chat request's prompt is the Llama 3.1 template's rendering, its reply is
// Model.Generate's on that prompt, and generation stops at <|eot_id|> and
// <|end_of_text|>.
func TestLlama3Chat(t *testing.T) {
	tok, err := tokenizer.LoadJSON(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := llama.Config{Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: tok.VocabSize(),
		NormEps: 1e-5, RopeTheta: 500000, MaxSeqLen: 512, BOS: tok.BOS(), EOS: []int32{tok.EOT()}, TiedEmbed: true}
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Model: m, Tokenizer: tok, Models: []Served{{ID: "llama"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer func() { ts.Close(); s.Close() }()
	for _, name := range []string{tokenizer.EOTID, tokenizer.EndOfText} {
		id, ok := tok.SpecialID(name)
		if !ok || !slices.Contains(s.stopIDs, id) {
			t.Errorf("stop tokens %v lack %s (%d)", s.stopIDs, name, id)
		}
	}
	msgs := []tokenizer.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hi."}}
	ids, _, err := tokenizer.EncodeChat(tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Generate([][]int32{ids}, llama.GenerateOptions{MaxNew: 6, Stop: s.stopIDs})
	if err != nil {
		t.Fatal(err)
	}
	dec := tokenizer.NewStreamDecoder(tok)
	dec.SkipSpecial = true
	dec.Next(ids[len(ids)-1])
	var want strings.Builder
	for _, id := range g[0].Tokens {
		piece, _ := dec.Next(id)
		want.WriteString(piece)
	}
	want.WriteString(dec.Flush())
	body, _ := json.Marshal(map[string]any{"model": "llama", "messages": msgs, "max_tokens": 6, "temperature": 0})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r chatReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, r, err)
	}
	if got := *r.Choices[0].Message.Content; got != want.String() {
		t.Errorf("reply %q, want %q", got, want.String())
	}
	if r.Usage.PromptTokens != len(ids) || r.Usage.CompletionTokens != len(g[0].Tokens) {
		t.Errorf("usage %+v; want %d prompt tokens (the template's), %d completion tokens", *r.Usage, len(ids), len(g[0].Tokens))
	}
}
