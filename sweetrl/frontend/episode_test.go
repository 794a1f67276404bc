package frontend

import (
	"context"
	"image/color"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnwise/turnwise/sweetrl"
)

// TestRunEpisodeScripted plays an episode end to end with the scripted
// simulator: a turn without a page, a turn with one, then the answer.
func TestRunEpisodeScripted(t *testing.T) {
	task := sweetrl.Task{ProblemDescription: "A bakery site.", GroundTruth: "<html>target</html>"}
	r := &fakeRenderer{}
	agent := &scriptedAgent{script: []string{
		"I need the colours.\nOUTPUT: What colours do you like?",
		"Try a draft.\nOUTPUT:\n<html><body>draft</body></html>",
		"Done.\nOUTPUT: I WANT TO ANSWER: <html><body>final</body></html>",
	}}
	tr, err := RunEpisode(context.Background(), task, agent, r, ScriptedSimulator{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Answer != "<html><body>final</body></html>" {
		t.Errorf("answer %q", tr.Answer)
	}
	// Target once, then the draft; the final page is not rendered.
	if want := []string{"<html>target</html>", "<html><body>draft</body></html>"}; strings.Join(r.pages, "|") != strings.Join(want, "|") {
		t.Errorf("rendered %q, want %q", r.pages, want)
	}
	h := tr.DialogueHistory
	if len(h) != 6 {
		t.Fatalf("history of %d turns, want 6: %+v", len(h), h)
	}
	if h[0].Role != sweetrl.RoleUser || h[0].Content != task.ProblemDescription {
		t.Errorf("turn 0 = %+v", h[0])
	}
	if h[1].Content != " What colours do you like?" || h[1].Output != agent.script[0] || h[1].Input == "" {
		t.Errorf("turn 1 = %+v", h[1])
	}
	if h[2].Content != ScriptedNoPage {
		t.Errorf("reply to a turn without a page = %q", h[2].Content)
	}
	// The fake renders 16 pixels wide and 8 + len(page) mod 5 high: the
	// draft (31 bytes) 9, the target (19 bytes) 12.
	if want := "Your page is 16×9 pixels; mine is 16×12 and looks different."; h[4].Content != want {
		t.Errorf("reply to the draft = %q, want %q", h[4].Content, want)
	}
	if h[5].Role != sweetrl.RoleAssistant || !strings.Contains(h[5].Content, sweetrl.AnswerMarker) {
		t.Errorf("last turn = %+v", h[5])
	}
	if got := agent.seen[0][0]; got.Role != "system" || got.Content != AgentSystemPrompt {
		t.Errorf("agent's first message = %+v, want the frontend system prompt", got)
	}
	if tr.Reward != 0 {
		t.Errorf("reward %v before scoring", tr.Reward)
	}
}

// TestRunEpisodeLastTurn checks the end at MaxAgentTurns, the cut of the
// simulator's replies, and that the answer is the last page written even
// when later turns have none.
func TestRunEpisodeLastTurn(t *testing.T) {
	task := sweetrl.Task{ProblemDescription: "p", GroundTruth: "<html>t</html>"}
	script := make([]string, MaxAgentTurns)
	for i := range script {
		script[i] = "OUTPUT: more questions"
	}
	script[3] = "OUTPUT: <body>page four</body>"
	agent := &scriptedAgent{script: script}
	sim := &echoSimulator{reply: strings.Repeat("é", SimulatorReplyLimit+50)}
	tr, err := RunEpisode(context.Background(), task, agent, &fakeRenderer{}, sim)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.DialogueHistory) != 2*MaxAgentTurns {
		t.Errorf("history of %d turns, want %d", len(tr.DialogueHistory), 2*MaxAgentTurns)
	}
	if tr.Answer != "<body>page four</body>" {
		t.Errorf("answer %q, want the page of turn 4", tr.Answer)
	}
	for i, turn := range tr.DialogueHistory {
		if turn.Role == sweetrl.RoleUser && i > 0 {
			if n := utf8.RuneCountInString(turn.Content); n != SimulatorReplyLimit {
				t.Fatalf("human turn %d has %d characters, want %d", i, n, SimulatorReplyLimit)
			}
		}
	}
	// The simulator spoke after turns 1..9 and saw a page only after turn 4.
	if len(sim.shown) != MaxAgentTurns-1 {
		t.Fatalf("simulator called %d times, want %d", len(sim.shown), MaxAgentTurns-1)
	}
	for i, shown := range sim.shown {
		if shown != (i == 3) {
			t.Errorf("after turn %d the simulator was shown a page: %v", i+1, shown)
		}
	}
}

func TestRunEpisodeRenderFailure(t *testing.T) {
	task := sweetrl.Task{ProblemDescription: "p", GroundTruth: "<html>t</html>"}
	r := &fakeRenderer{fail: "<html>bad</html>"}
	agent := &scriptedAgent{script: []string{"OUTPUT: <html>bad</html>"}}
	_, err := RunEpisode(context.Background(), task, agent, r, ScriptedSimulator{})
	if err == nil || !strings.Contains(err.Error(), "agent turn 1") || !strings.Contains(err.Error(), "browser died") {
		t.Errorf("error %v, want the render failure of agent turn 1", err)
	}
	r = &fakeRenderer{fail: "<html>t</html>"}
	_, err = RunEpisode(context.Background(), task, agent, r, ScriptedSimulator{})
	if err == nil || !strings.Contains(err.Error(), "target page") {
		t.Errorf("error %v, want the target's render failure", err)
	}
}

func TestSimulatorParts(t *testing.T) {
	target := []byte("T")
	with := SimulatorParts([]byte("A"), target)
	if len(with) != 5 || with[0].Text != SimulatorPrompt || with[1].Text != AgentImageText ||
		with[2].ImageURL == nil || with[2].ImageURL.URL != "data:image/png;base64,QQ==" ||
		with[3].Text != TargetImageText || with[4].ImageURL.URL != "data:image/png;base64,VA==" {
		t.Errorf("parts with an agent page = %+v", with)
	}
	without := SimulatorParts(nil, target)
	if len(without) != 4 || without[1].Text != NoAgentImageText || without[1].Type != "text" || without[3].Type != "image_url" {
		t.Errorf("parts without an agent page = %+v", without)
	}
}

func TestScriptedSimulatorSame(t *testing.T) {
	r := &fakeRenderer{colours: map[string]color.RGBA{"a": {1, 2, 3, 255}}}
	shot, err := r.Render(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ScriptedSimulator{}.Respond(context.Background(), shot, shot)
	if err != nil || got != ScriptedSame {
		t.Errorf("Respond(same, same) = %q, %v", got, err)
	}
	if _, err := (ScriptedSimulator{}).Respond(context.Background(), []byte("not a png"), shot); err == nil {
		t.Error("an agent screenshot that is not a PNG gave no error")
	}
}
