package frontend

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestLastPage checks the answer of a frontend dialogue: the last page an
// agent turn showed, whatever follows the answer marker.
func TestLastPage(t *testing.T) {
	agent := func(s string) sweetrl.Turn { return sweetrl.Turn{Role: sweetrl.RoleAssistant, Content: s} }
	user := func(s string) sweetrl.Turn { return sweetrl.Turn{Role: sweetrl.RoleUser, Content: s} }
	for _, tc := range []struct {
		name    string
		history []sweetrl.Turn
		want    string
	}{
		{"no page", []sweetrl.Turn{user("p"), agent("I WANT TO ANSWER: nothing")}, ""},
		{"the answer's page", []sweetrl.Turn{user("p"), agent("<html>a</html>"), user("no"), agent("I WANT TO ANSWER: <html>b</html>")}, "<html>b</html>"},
		{"an earlier page", []sweetrl.Turn{user("p"), agent("<body>a</body>"), user("<html>user's</html>"), agent("done")}, "<body>a</body>"},
		{"picsum rewritten", []sweetrl.Turn{user("p"), agent(`<html><img src="https://picsum.photos/200/100"></html>`)}, `<html><img src="https://picsum.photos/id/48/200/100"></html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LastPage(tc.history); got != tc.want {
				t.Errorf("LastPage = %q, want %q", got, tc.want)
			}
		})
	}
	// The protocol's answer is LastPage's.
	e := sweetrl.NewEpisodeWith(sweetrl.Task{ProblemDescription: "p", GroundTruth: "<html>t</html>"}, Protocol())
	e.AgentTurn("in", "OUTPUT: <html>draft</html>")
	e.HumanTurn("more red")
	if done, _ := e.AgentTurn("in", "OUTPUT: I WANT TO ANSWER: as before"); !done || e.Answer() != "<html>draft</html>" {
		t.Errorf("episode done %v with answer %q, want the draft", done, e.Answer())
	}
}

// TestPageSimulator plays the human for sweetrl's episode drivers: the
// agent's page and the target rendered, the target once per task while it
// is kept, and no screenshot for a reply without a page.
func TestPageSimulator(t *testing.T) {
	r := &fakeRenderer{}
	sim := &echoSimulator{reply: "closer"}
	ps := &PageSimulator{Renderer: r, Sim: sim, CacheSize: 1}
	ctx := context.Background()
	a := sweetrl.Task{ProblemDescription: "a", GroundTruth: "<html>target a</html>"}
	b := sweetrl.Task{ProblemDescription: "b", GroundTruth: "<html>target b</html>"}
	turn := func(s string) []tokenizer.Message {
		return []tokenizer.Message{{Role: "user", Content: "p"}, {Role: sweetrl.RoleAssistant, Content: s}}
	}
	for _, step := range []struct {
		task  sweetrl.Task
		reply string
		shown bool     // whether the simulator saw an agent screenshot
		pages []string // pages rendered by this step
	}{
		{a, "OUTPUT: <html>one</html>", true, []string{"<html>target a</html>", "<html>one</html>"}},
		{a, "what colour?", false, nil},
		{b, "<body>two</body>", true, []string{"<html>target b</html>", "<body>two</body>"}},
		{a, "nothing", false, []string{"<html>target a</html>"}}, // a was dropped from the cache of one
	} {
		before := len(r.pages)
		got, err := ps.Respond(ctx, step.task, turn(step.reply))
		if err != nil || got != "closer" {
			t.Fatalf("reply to %q: %q, %v", step.reply, got, err)
		}
		if shown := sim.shown[len(sim.shown)-1]; shown != step.shown {
			t.Errorf("reply to %q: agent screenshot shown %v, want %v", step.reply, shown, step.shown)
		}
		if rendered := r.pages[before:]; strings.Join(rendered, "|") != strings.Join(step.pages, "|") {
			t.Errorf("reply to %q rendered %q, want %q", step.reply, rendered, step.pages)
		}
		want, _ := r.Render(ctx, step.task.GroundTruth)
		r.pages = r.pages[:len(r.pages)-1]
		if !bytes.Equal(sim.target, want) {
			t.Errorf("reply to %q: the simulator was not shown the task's target", step.reply)
		}
	}
	if _, err := ps.Respond(ctx, a, []tokenizer.Message{{Role: "user", Content: "p"}}); err == nil {
		t.Error("a reply to no agent turn gave no error")
	}
	r.fail = "<html>bad</html>"
	if _, err := ps.Respond(ctx, a, turn("<html>bad</html>")); err == nil || !strings.Contains(err.Error(), "browser died") {
		t.Errorf("a renderer failure gave %v", err)
	}
}

// batchRenderer is a fakeRenderer that renders batches and counts them.
type batchRenderer struct {
	fakeRenderer
	batches []int
}

func (r *batchRenderer) RenderAll(ctx context.Context, pages []string) ([][]byte, error) {
	r.batches = append(r.batches, len(pages))
	out := make([][]byte, len(pages))
	for i, p := range pages {
		var err error
		if out[i], err = r.fakeRenderer.Render(ctx, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestScorerBatches checks that a BatchRenderer gets each batch's distinct
// pages in one call (the empty answer excepted, a target of two answers
// once), with the cosines of one page at a time.
func TestScorerBatches(t *testing.T) {
	br := &batchRenderer{}
	one := Scorer{Renderer: &fakeRenderer{}, Embedder: fakeEmbedder{}, Batch: 2}
	many := Scorer{Renderer: br, Embedder: fakeEmbedder{}, Batch: 2}
	answers := []string{"<html>x</html>", "", "<html>long page</html>"}
	targets := []string{"<html>y</html>", "<html>y</html>", "<html>z</html>"}
	want, err := one.Cosines(context.Background(), answers, targets)
	if err != nil {
		t.Fatal(err)
	}
	got, err := many.Cosines(context.Background(), answers, targets)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cosine %d = %v in batches, %v one at a time", i, got[i], want[i])
		}
	}
	if want := []int{2, 2}; len(br.batches) != 2 || br.batches[0] != want[0] || br.batches[1] != want[1] {
		t.Errorf("batches of %v pages, want %v", br.batches, want)
	}
}
