package main

import (
	"bytes"
	"encoding/json"
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
