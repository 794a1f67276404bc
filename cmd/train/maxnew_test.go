package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGenerateMaxNewCapped asks the tiny preset (a context of 256 tokens)
// for 100 million tokens: it must stop at the context, quickly, saying so
// in one line.
func TestGenerateMaxNewCapped(t *testing.T) {
	var out, errOut bytes.Buffer
	start := time.Now()
	err := runGenerate([]string{"--preset", "tiny", "--ids", "[1,5,6]", "--max-new", "100000000", "--json", "--threads", "1"},
		strings.NewReader(""), &out, &errOut)
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, errOut.String())
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("generate took %v", d)
	}
	const notice = "--max-new 100000000 capped at 253: the model's context is 256 tokens, the prompt 3\n"
	if errOut.String() != notice {
		t.Errorf("stderr %q, want the one line %q", errOut.String(), notice)
	}
	var res struct{ IDs []int32 }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.IDs) == 0 || len(res.IDs) > 253 {
		t.Errorf("generated %d tokens, want 1 to 253", len(res.IDs))
	}

	// A prompt that fills the context is an error.
	ids, _ := json.Marshal(make([]int32, 256))
	err = runGenerate([]string{"--preset", "tiny", "--ids", string(ids), "--max-new", "4"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "fill the model's context of 256") {
		t.Errorf("a prompt of the whole context: %v", err)
	}
}

// TestGenerateTopK checks that --top-k 1 draws the greedy continuation at
// temperature 1, whatever the seed of the draws, and that the same draws
// without --top-k are another continuation (so the first check means
// something). The seed of the draws is also the random weights' seed, so
// every run takes the same --seed and the draws differ by its use alone.
func TestGenerateTopK(t *testing.T) {
	gen := func(extra ...string) []int32 {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"--preset", "tiny", "--ids", "[1,5,6]", "--max-new", "12", "--json", "--threads", "1", "--seed", "3"}, extra...)
		if err := runGenerate(args, strings.NewReader(""), &out, &errOut); err != nil {
			t.Fatalf("generate %q: %v\n%s", extra, err, errOut.String())
		}
		var res struct{ IDs []int32 }
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		return res.IDs
	}
	greedy := gen()
	if got := gen("--temperature", "1", "--top-k", "1"); !slices.Equal(got, greedy) {
		t.Errorf("--top-k 1 --temperature 1: %v, greedy %v", got, greedy)
	}
	if got := gen("--temperature", "1", "--top-k", "1", "--top-p", "0.5"); !slices.Equal(got, greedy) {
		t.Errorf("--top-k 1 --top-p 0.5 --temperature 1: %v, greedy %v", got, greedy)
	}
	if got := gen("--temperature", "1"); slices.Equal(got, greedy) {
		t.Errorf("--temperature 1 without --top-k drew the greedy continuation %v too", got)
	}
	if got := gen("--temperature", "1", "--top-k", "100000"); !slices.Equal(got, gen("--temperature", "1")) {
		t.Errorf("--top-k over the vocabulary: %v, not the draws without it", got)
	}
}
