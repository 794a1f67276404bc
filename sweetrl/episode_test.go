package sweetrl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnwise/turnwise/tokenizer"
)

func TestVisibleReply(t *testing.T) {
	tests := []struct{ in, want string }{
		{"no marker at all", "no marker at all"},
		{"", ""},
		{"thought OUTPUT: hello", " hello"},
		{"OUTPUT:hello", "hello"},
		{"a OUTPUT: b OUTPUT: c", " b "},
		{"output: lower case is not the marker", "output: lower case is not the marker"},
		{"OUTPUT:", ""},
		{"x OUTPUT: I WANT TO ANSWER: def f(): pass", " I WANT TO ANSWER: def f(): pass"},
	}
	for _, tc := range tests {
		if got := VisibleReply(tc.in); got != tc.want {
			t.Errorf("VisibleReply(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"Which inputs?", "", false},
		{"I WANT TO ANSWER: def f(x):\n    return x\n", "def f(x):\n    return x", true},
		{"OUTPUT: I WANT TO ANSWER:\n```python\ndef f(): pass\n```", "```python\ndef f(): pass\n```", true},
		{"I WANT TO ANSWER:", "", true},
		{"I WANT TO ANSWER: a I WANT TO ANSWER: b", "a I WANT TO ANSWER: b", true},
		{"i want to answer: x", "", false},
	}
	for _, tc := range tests {
		got, ok := Answer(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Answer(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTruncateReply(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 400, "short"},
		{strings.Repeat("a", 401), 400, strings.Repeat("a", 400)},
		{strings.Repeat("a", 400), 400, strings.Repeat("a", 400)},
		{strings.Repeat("é", 401), 400, strings.Repeat("é", 400)}, // characters, not bytes
		{"héllo", 2, "hé"},
		{"abc", 0, ""},
		{"a\xffb", 2, "a\xff"},
	}
	for _, tc := range tests {
		got := TruncateReply(tc.in, tc.limit)
		if got != tc.want {
			t.Errorf("TruncateReply(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
		if utf8.ValidString(tc.in) && !utf8.ValidString(got) {
			t.Errorf("TruncateReply(%q, %d) split a character", tc.in, tc.limit)
		}
	}
}

var testTask = Task{
	ProblemDescription: "Write a function. The signature of the function is: def f(x)",
	HiddenInformation:  "def f(x):\n\n    y = x * 2\n    return y",
	GroundTruth:        "def f(x):\n\n    y = x * 2\n    return y",
	TestCases:          []TestCase{{"test1", "f(1)"}},
}

func TestEpisodeAnswerEndsEpisode(t *testing.T) {
	e := NewEpisode(testTask)
	if want := []Turn{{Role: RoleUser, Content: testTask.ProblemDescription}}; !reflect.DeepEqual(e.History(), want) {
		t.Fatalf("initial history %+v", e.History())
	}
	if e.NeedsHuman() || e.Done() {
		t.Fatal("fresh episode should wait for the agent")
	}
	done, err := e.AgentTurn("prompt1", "I should ask. OUTPUT: What does f do?")
	if err != nil || done {
		t.Fatalf("turn 1: done=%v err=%v", done, err)
	}
	if !e.NeedsHuman() {
		t.Fatal("the human should speak after an agent question")
	}
	if _, err := e.AgentTurn("p", "again"); err == nil {
		t.Error("two agent turns in a row accepted")
	}
	if err := e.HumanTurn(strings.Repeat("x", 500)); err != nil {
		t.Fatal(err)
	}
	if err := e.HumanTurn("again"); err == nil {
		t.Error("two human turns in a row accepted")
	}
	done, err = e.AgentTurn("prompt2", "Got it. OUTPUT: I WANT TO ANSWER: def f(x):\n    return 2*x\n")
	if err != nil || !done {
		t.Fatalf("turn 2: done=%v err=%v", done, err)
	}
	if got, want := e.Answer(), "def f(x):\n    return 2*x"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if e.NeedsHuman() {
		t.Error("the human should not speak after the answer")
	}
	if _, err := e.AgentTurn("p", "x"); !errors.Is(err, ErrEpisodeOver) {
		t.Errorf("agent turn after end: %v", err)
	}
	if err := e.HumanTurn("x"); !errors.Is(err, ErrEpisodeOver) {
		t.Errorf("human turn after end: %v", err)
	}
	h := e.History()
	want := []Turn{
		{Role: RoleUser, Content: testTask.ProblemDescription},
		{Role: RoleAssistant, Content: " What does f do?", Input: "prompt1", Output: "I should ask. OUTPUT: What does f do?"},
		{Role: RoleUser, Content: strings.Repeat("x", SimulatorReplyLimit)},
		{Role: RoleAssistant, Content: " I WANT TO ANSWER: def f(x):\n    return 2*x\n", Input: "prompt2", Output: "Got it. OUTPUT: I WANT TO ANSWER: def f(x):\n    return 2*x\n"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("history\n got %+v\nwant %+v", h, want)
	}
	tr := e.Trajectory(0.5)
	if tr.Answer != e.Answer() || tr.Reward != 0.5 || !reflect.DeepEqual(tr.DialogueHistory, want) || !reflect.DeepEqual(tr.Task, testTask) {
		t.Errorf("trajectory %+v", tr)
	}
	// History returns a copy.
	h[0].Content = "changed"
	if e.History()[0].Content == "changed" {
		t.Error("History shares storage with the episode")
	}
}

func TestEpisodeTurnLimit(t *testing.T) {
	tests := []struct {
		name       string
		answerAt   int // agent turn that answers; 0 for never
		wantTurns  int
		wantAnswer string
	}{
		{"answers at once", 1, 1, "def f(x): return 1"},
		{"answers on turn 9", 9, 9, "def f(x): return 9"},
		{"answers on turn 10", 10, 10, "def f(x): return 10"},
		// The 10th reply's visible part is the answer, as in the reference.
		{"never answers", 0, MaxAgentTurns, " still asking"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEpisode(testTask)
			for turn := 1; !e.Done(); turn++ {
				if turn > MaxAgentTurns {
					t.Fatal("episode did not end")
				}
				out := fmt.Sprintf("reply %d OUTPUT: still asking", turn)
				if turn == tc.answerAt {
					out = fmt.Sprintf("I WANT TO ANSWER: def f(x): return %d", turn)
				}
				if _, err := e.AgentTurn("p", out); err != nil {
					t.Fatal(err)
				}
				if e.NeedsHuman() {
					if err := e.HumanTurn("ok"); err != nil {
						t.Fatal(err)
					}
				}
			}
			if e.AgentTurns() != tc.wantTurns || e.Answer() != tc.wantAnswer {
				t.Errorf("turns %d answer %q; want %d %q", e.AgentTurns(), e.Answer(), tc.wantTurns, tc.wantAnswer)
			}
			if got, want := len(e.History()), 2*tc.wantTurns; got != want {
				t.Errorf("history has %d turns, want %d", got, want)
			}
		})
	}
}

// The end-of-episode marker counts only in the visible part of a reply, and
// a reply is recorded up to a second OUTPUT: marker, as the reference does.
func TestEpisodeReadsVisiblePart(t *testing.T) {
	tests := []struct {
		name, out, wantOutput, wantAnswer string
		wantDone                          bool
	}{
		{"marker in the hidden thought", "I WANT TO ANSWER: soon OUTPUT: which inputs?", "I WANT TO ANSWER: soon OUTPUT: which inputs?", "", false},
		{"marker in the visible part", "ready OUTPUT: I WANT TO ANSWER: def f(): pass", "ready OUTPUT: I WANT TO ANSWER: def f(): pass", "def f(): pass", true},
		{"second OUTPUT: dropped", "a OUTPUT: I WANT TO ANSWER: x OUTPUT: y", "a OUTPUT: I WANT TO ANSWER: x ", "x", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEpisode(testTask)
			done, err := e.AgentTurn("p", tc.out)
			if err != nil {
				t.Fatal(err)
			}
			h := e.History()
			if done != tc.wantDone || e.Answer() != tc.wantAnswer || h[1].Output != tc.wantOutput || h[1].Content != VisibleReply(tc.out) {
				t.Errorf("done %v answer %q output %q content %q; want %v %q %q", done, e.Answer(), h[1].Output, h[1].Content, tc.wantDone, tc.wantAnswer, tc.wantOutput)
			}
		})
	}
}

func TestAgentMessages(t *testing.T) {
	e := NewEpisode(testTask)
	msgs := e.AgentMessages()
	want := []tokenizer.Message{{Role: "system", Content: AgentSystemPrompt}, {Role: "user", Content: testTask.ProblemDescription}}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("got %+v", msgs)
	}
	for _, s := range []string{OutputMarker, AnswerMarker} {
		if !strings.Contains(AgentSystemPrompt, s) {
			t.Errorf("system prompt does not mention %q", s)
		}
	}
}

func TestScriptedSimulator(t *testing.T) {
	ctx := context.Background()
	hist := func(agentTurns int) []tokenizer.Message {
		h := []tokenizer.Message{{Role: RoleUser, Content: "p"}}
		for i := 0; i < agentTurns; i++ {
			h = append(h, tokenizer.Message{Role: RoleAssistant, Content: "q"})
			if i < agentTurns-1 {
				h = append(h, tokenizer.Message{Role: RoleUser, Content: "a"})
			}
		}
		return h
	}
	tests := []struct {
		sim   ScriptedSimulator
		turns int
		want  string
	}{
		{ScriptedSimulator{}, 1, "Hint: def f(x):"},
		{ScriptedSimulator{}, 2, "Hint: y = x * 2"},
		{ScriptedSimulator{}, 3, "Hint: return y"},
		{ScriptedSimulator{}, 4, "I have nothing more to add."},
		{ScriptedSimulator{Exhausted: "Done."}, 5, "Done."},
	}
	for _, tc := range tests {
		got, err := tc.sim.Respond(ctx, testTask, hist(tc.turns))
		if err != nil || got != tc.want {
			t.Errorf("after %d agent turns: %q, %v; want %q", tc.turns, got, err, tc.want)
		}
	}
	if _, err := (ScriptedSimulator{}).Respond(ctx, testTask, hist(0)); err == nil {
		t.Error("no error with no agent turn")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (ScriptedSimulator{}).Respond(cctx, testTask, hist(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// scriptedAgent replies from a fixed list and records what it was shown.
type scriptedAgent struct {
	replies []string
	seen    [][]tokenizer.Message
}

func (a *scriptedAgent) Act(ctx context.Context, msgs []tokenizer.Message) (string, string, error) {
	a.seen = append(a.seen, msgs)
	if len(a.seen) > len(a.replies) {
		return "", "", errors.New("out of replies")
	}
	return fmt.Sprintf("prompt %d", len(a.seen)), a.replies[len(a.seen)-1], nil
}

func TestRunEpisode(t *testing.T) {
	agent := &scriptedAgent{replies: []string{
		"Need details. OUTPUT: What should f return?",
		"OUTPUT: Anything else?",
		"OUTPUT: I WANT TO ANSWER: def f(x):\n    return x * 2",
	}}
	tr, err := RunEpisode(context.Background(), testTask, agent, ScriptedSimulator{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Answer != "def f(x):\n    return x * 2" {
		t.Errorf("answer %q", tr.Answer)
	}
	wantRoles := []string{"user", "assistant", "user", "assistant", "user", "assistant"}
	var roles []string
	for _, h := range tr.DialogueHistory {
		roles = append(roles, h.Role)
	}
	if !reflect.DeepEqual(roles, wantRoles) {
		t.Errorf("roles %v, want %v", roles, wantRoles)
	}
	if got := tr.DialogueHistory[2].Content; got != "Hint: def f(x):" {
		t.Errorf("first human reply %q", got)
	}
	if got := tr.DialogueHistory[3].Input; got != "prompt 2" {
		t.Errorf("second agent turn input %q", got)
	}
	// The third prompt shows the visible replies, not the hidden thoughts.
	third := agent.seen[2]
	if len(third) != 6 || third[0].Role != "system" || third[2].Content != " What should f return?" {
		t.Errorf("third prompt %+v", third)
	}

	_, err = RunEpisode(context.Background(), testTask, &scriptedAgent{}, ScriptedSimulator{})
	if err == nil || !strings.Contains(err.Error(), "agent turn 1") {
		t.Errorf("failing agent: %v", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunEpisode(cctx, testTask, agent, ScriptedSimulator{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestEpisodeProtocol(t *testing.T) {
	p := Protocol{System: "", MaxTurns: 2, ReplyLimit: 3}
	e := NewEpisodeWith(testTask, p)
	if msgs := e.AgentMessages(); len(msgs) != 1 || msgs[0].Role != RoleUser {
		t.Fatalf("no system prompt: got %+v", msgs)
	}
	if done, err := e.AgentTurn("in", "what?"); done || err != nil {
		t.Fatalf("turn 1: done %v, err %v", done, err)
	}
	if err := e.HumanTurn("abcdef"); err != nil {
		t.Fatal(err)
	}
	if got := e.History()[2].Content; got != "abc" {
		t.Errorf("reply cut to %q, want %q", got, "abc")
	}
	done, err := e.AgentTurn("in", "def f(): pass")
	if !done || err != nil || e.Answer() != "def f(): pass" {
		t.Errorf("turn 2 of 2: done %v, err %v, answer %q", done, err, e.Answer())
	}
	p.System = "be brief"
	if msgs := NewEpisodeWith(testTask, p).AgentMessages(); msgs[0].Content != "be brief" {
		t.Errorf("system prompt %q", msgs[0].Content)
	}
}

// TestEpisodeProtocolAnswer checks a protocol's own answer rule: it gets
// the whole dialogue once the episode ends, by the marker or the turn
// limit, and its answer is the episode's and the trajectory's.
func TestEpisodeProtocolAnswer(t *testing.T) {
	var seen []int
	p := Protocol{MaxTurns: 2, ReplyLimit: 100, Answer: func(h []Turn) string {
		seen = append(seen, len(h))
		return h[1].Content // the first agent turn's
	}}
	for _, tc := range []struct {
		name    string
		replies []string
		turns   int // the history's length when the episode ends
	}{
		{"the marker", []string{"OUTPUT: first", "OUTPUT: I WANT TO ANSWER: second"}, 4},
		{"the turn limit", []string{"OUTPUT: first", "OUTPUT: second"}, 4},
		{"at once", []string{"OUTPUT: first I WANT TO ANSWER: x"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			e := NewEpisodeWith(testTask, p)
			for i, r := range tc.replies {
				if i > 0 {
					e.HumanTurn("go on")
				}
				e.AgentTurn("in", r)
			}
			want := VisibleReply(tc.replies[0])
			if !e.Done() || e.Answer() != want || e.Trajectory(0).Answer != want {
				t.Errorf("done %v, answer %q, want %q", e.Done(), e.Answer(), want)
			}
			if len(seen) != 1 || seen[0] != tc.turns {
				t.Errorf("the rule saw histories of %v turns, want one of %d", seen, tc.turns)
			}
		})
	}
}
