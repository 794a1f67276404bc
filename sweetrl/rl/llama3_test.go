package rl

import (
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestLlama3Sequences checks the critic's, the policy's and a turn's
// sequences in the real Llama 3.1 chat format: the weighted tokens decode
// to exactly each agent turn's body and its <|eot_id|>, and a turn's
// prompt is a prefix of the dialogue that continues it.
func TestLlama3Sequences(t *testing.T) {
	tok, err := tokenizer.Load(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tr := sweetrl.Trajectory{
		Task: sweetrl.Task{ProblemDescription: "Write f.\nThe signature of the function is: def f(x)", GroundTruth: "def f(x):\n    return x * 2"},
		DialogueHistory: []sweetrl.Turn{
			{Role: sweetrl.RoleUser, Content: "Write f.\nThe signature of the function is: def f(x)"},
			{Role: sweetrl.RoleAssistant, Content: " What should f return?"},
			{Role: sweetrl.RoleUser, Content: "Twice x."},
			{Role: sweetrl.RoleAssistant, Content: "I WANT TO ANSWER: def f(x):\n    return 2 * x"},
		},
	}
	decodeWeighted := func(s Seq) string {
		var ids []int32
		for i, w := range s.W {
			if w != 0 {
				ids = append(ids, s.IDs[i])
			}
		}
		text, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	want := "What should f return?<|eot_id|>I WANT TO ANSWER: def f(x):\n    return 2 * x<|eot_id|>"
	cs, err := CriticSeq(tok, sweetrl.AgentSystemPrompt, tr, ScoreTurn)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeWeighted(cs); got != want {
		t.Errorf("critic's weighted tokens %q, want %q", got, want)
	}
	// As the reference's critic text: the prefix with no BOS before it,
	// then the templated prompt (its own BOS, the system prompt) — the
	// whole "input" the agent saw.
	if text, _ := tok.Decode(cs.IDs); !strings.HasPrefix(text, "In light that the final answer is: def f(x):\n    return x * 2.<|begin_of_text|><|start_header_id|>system<|end_header_id|>") ||
		!strings.Contains(text, sweetrl.AgentSystemPrompt) {
		t.Errorf("critic sequence starts %q", text[:min(len(text), 160)])
	}
	ps, err := PolicySeq(tok, sweetrl.AgentSystemPrompt, tr)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeWeighted(ps); got != want {
		t.Errorf("policy's weighted tokens %q, want %q", got, want)
	}
	msgs := withSystem(sweetrl.AgentSystemPrompt, sweetrl.TurnsToMessages(tr.DialogueHistory))
	ls, err := lastTurnSeq(tok, nil, msgs, sum)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeWeighted(ls); got != "I WANT TO ANSWER: def f(x):\n    return 2 * x<|eot_id|>" {
		t.Errorf("last turn's weighted tokens %q", got)
	}
}
