package demotask

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// tallyOf is the tally task of the given list and keys ("b c d g h",
// "b d g").
func tallyOf(list, keys string) sweetrl.Task {
	return tallyTask([]byte(strings.ReplaceAll(list, " ", "")), []byte(strings.ReplaceAll(keys, " ", "")))
}

func TestTallyTasks(t *testing.T) {
	tasks := TallyTasks(300, 7)
	if again := TallyTasks(10, 7); !reflect.DeepEqual(again, tasks[:10]) {
		t.Error("the first tasks of a larger call differ")
	}
	for i, task := range tasks {
		listed, keys, err := parseTally(task)
		if err != nil || task.GroundTruth != task.HiddenInformation || len(task.TestCases) != NumKeys || len(listed) != TallyCandidates {
			t.Fatalf("task %d: %+v (%v)", i, task, err)
		}
		for j, tc := range task.TestCases {
			if tc.Call != string(keys[j]) {
				t.Errorf("task %d: test %d calls %q, want %q", i, j, tc.Call, keys[j])
			}
		}
	}
	for _, bad := range []sweetrl.Task{
		{ProblemDescription: "Find the 3 keys among b c d g.", HiddenInformation: "b d g"},
		{ProblemDescription: "Find the 3 keys among b c d g h.", HiddenInformation: "b d"},
		{ProblemDescription: "Find the 3 keys among b c d g h.", HiddenInformation: "d b g"},
		{ProblemDescription: "Find the 3 keys among b c d g h.", HiddenInformation: "b d x"},
		{ProblemDescription: "Find the 3 keys among b c d g h.", HiddenInformation: "b=4 d=0 g=7"},
	} {
		if _, _, err := parseTally(bad); err == nil {
			t.Errorf("%+v: read as a tally task", bad)
		}
	}
	train, test := TallySplit(7, 200, 100)
	seen := map[string]bool{}
	for _, tk := range train {
		seen[tk.ProblemDescription+tk.HiddenInformation] = true
	}
	for _, tk := range test {
		if seen[tk.ProblemDescription+tk.HiddenInformation] {
			t.Fatal("a test task is also a train task")
		}
	}
}

// TestTallySimulator checks the replies: the letter the last agent message
// asks about (its first lone letter, or the next listed letter for
// "next?") is answered, and the count is that of the distinct keys the
// agent's messages have asked about.
func TestTallySimulator(t *testing.T) {
	task := tallyOf("b c d g h", "b d g")
	for _, tc := range []struct {
		name  string
		agent []string // the agent's messages so far
		want  string
	}{
		{"a key", []string{"b?"}, "b: key (1/3)"},
		{"a distractor", []string{"c?"}, "c: no (0/3)"},
		{"an unlisted letter", []string{"a?"}, "a: no (0/3)"},
		{"no letter", []string{"what?"}, "? (0/3)"},
		{"next", []string{"next?"}, "b: key (1/3)"},
		{"next, twice", []string{"next?", "next?"}, "c: no (1/3)"},
		{"next after a letter named", []string{"c?", "next?"}, "b: key (1/3)"},
		{"next, as a word", []string{"the next one?"}, "b: key (1/3)"},
		{"not the word next", []string{"nextone?"}, "? (0/3)"},
		{"a letter before next", []string{"next: d?"}, "d: key (1/3)"},
		{"the first letter only", []string{"d and g?"}, "d: key (1/3)"},
		{"a key asked again", []string{"b?", "b?"}, "b: key (1/3)"},
		{"counting across turns", []string{"next?", "next?", "next?"}, "d: key (2/3)"},
		{"out of order", []string{"g?"}, "g: key (1/3)"},
		{"all found: the keys", []string{"next?", "next?", "next?", "next?"}, "g: key (3/3: b d g)"},
		{"after all found", []string{"b?", "d?", "g?", "x?"}, "x: no (3/3: b d g)"},
		{"every letter asked", []string{"b?", "c?", "d?", "h?", "g?", "next?"}, "? (3/3: b d g)"},
	} {
		var hist []tokenizer.Message
		for _, a := range tc.agent {
			hist = append(hist, tokenizer.Message{Role: sweetrl.RoleAssistant, Content: a}, tokenizer.Message{Role: sweetrl.RoleUser, Content: "…"})
		}
		got, err := TallySimulator{}.Respond(context.Background(), task, hist[:len(hist)-1])
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		reply string
		n     int
		ok    bool
	}{
		{"b: key (1/3)", 1, true}, {"? (0/3)", 0, true}, {"x: no (3/3: b d g)", 3, true}, {"h: no (2/3)", 2, true},
		{"b: key (1/3) next c", 0, false}, {"b: key", 0, false}, {"b: key (4/3)", 0, false}, {"b: key (1/4)", 0, false}, {"b: key (3/3)", 0, false},
		{"b: key (1/3: b)", 0, false}, {"g: key (3/3: b d)", 0, false}, {"(1/3) b: key", 0, false}, {"Find the 3 keys among b c d g h.", 0, false},
	} {
		if n, ok := tallyCount(tc.reply); n != tc.n || ok != tc.ok {
			t.Errorf("count of %q read as %d, %v; want %d, %v", tc.reply, n, ok, tc.n, tc.ok)
		}
	}
	if _, err := (TallySimulator{}).Respond(context.Background(), task, []tokenizer.Message{{Role: sweetrl.RoleUser, Content: "hi"}}); err == nil {
		t.Error("a dialogue without an agent message was answered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (TallySimulator{}).Respond(ctx, task, []tokenizer.Message{{Role: sweetrl.RoleAssistant, Content: "b?"}}); err == nil {
		t.Error("a done context was not reported")
	}
}

func TestTallyScorer(t *testing.T) {
	task := tallyOf("b c d g h", "b d g")
	for _, tc := range []struct {
		answer string
		passed int
		note   string
	}{
		{"b d g", 3, ""},
		{"g, b and d", 3, ""},
		{"b b d g", 3, ""},
		{"b d c", 2, ""},
		{"c h", 0, ""},
		{"b", 1, ""},
		{"b c d g", 0, "more than 3 letters"},
		{"407", 0, "no letters"},
		{"bdg", 0, "no letters"},
	} {
		sc, err := TallyScorer{}.Score(context.Background(), []sweetrl.Task{task}, []string{tc.answer})
		if err != nil {
			t.Fatal(err)
		}
		if s := sc[0]; s.Passed != tc.passed || s.Total != 3 || s.Note != tc.note || s.Reward != float64(tc.passed)/3 {
			t.Errorf("%q: %+v, want %d passed, note %q", tc.answer, s, tc.passed, tc.note)
		}
	}
	if _, err := (TallyScorer{}).Score(context.Background(), []sweetrl.Task{task}, nil); err == nil {
		t.Error("answers and tasks of different lengths were scored")
	}
	if _, err := (TallyScorer{}).Score(context.Background(), []sweetrl.Task{{HiddenInformation: "nope"}}, []string{"b"}); err == nil || !strings.Contains(err.Error(), "task 0") {
		t.Errorf("a foreign task: %v", err)
	}
}

// TestTallyBudget checks the turn budget: the optimal policy succeeds on
// every task, and one harmful turn taken at the start fails exactly the
// tasks whose last key is the fifth letter.
func TestTallyBudget(t *testing.T) {
	if p := TallyProtocol(); p.MaxTurns != TallyCandidates+1 {
		t.Errorf("budget of %d turns, want %d", p.MaxTurns, TallyCandidates+1)
	}
	wasteFirst := func(s tallyState) string {
		if len(s.turns) == 1 { // the task's statement alone
			return s.say(MoveWaste)
		}
		return tallyOptimal(s)
	}
	fifth := 0
	for i, task := range TallyTasks(500, 2) {
		opt := playTally(task, tallyOptimal)
		if opt.Reward != 1 || len(TallyHarmful(task, opt.DialogueHistory)) != 0 {
			t.Fatalf("task %d: the optimal policy got %v, harmful turns %v: %+v", i, opt.Reward, TallyHarmful(task, opt.DialogueHistory), opt.DialogueHistory)
		}
		if opt.Answer != task.GroundTruth {
			t.Errorf("task %d: the optimum's answer %q, want %q", i, opt.Answer, task.GroundTruth)
		}
		w := playTally(task, wasteFirst)
		late := lastKey(task) == TallyCandidates-1
		if late {
			fifth++
		}
		if (w.Reward == 1) == late {
			t.Errorf("task %d (last key fifth: %v): a wasted first turn got reward %v", i, late, w.Reward)
		}
		if h := TallyHarmful(task, w.DialogueHistory); len(h) != 1 || h[0] != 1 {
			t.Errorf("task %d: harmful turns %v, want [1] (the first agent turn)", i, h)
		}
	}
	if fifth == 0 || fifth == 500 {
		t.Errorf("%d of 500 tasks have their last key fifth", fifth)
	}
}

// TestTallyHarmful classifies the turns of hand-written dialogues.
func TestTallyHarmful(t *testing.T) {
	task := tallyOf("b c d g h", "b d g")
	right := TallyAnswer
	for _, tc := range []struct {
		name  string
		agent []string
		want  []int // indices of the agent turns that are harmful
	}{
		{"the optimum", []string{"next?", "next?", "next?", "next?", right}, nil},
		{"the optimum, naming the letters", []string{"b?", "c?", "d?", "g?", right}, nil},
		{"an empty question first", []string{"?", "next?", "next?", "next?", "next?", right}, []int{0}},
		{"a repeat", []string{"b?", "b?", "c?", "d?", "g?", right}, []int{1}},
		{"next after every letter", []string{"b?", "c?", "d?", "h?", "next?", right}, nil},
		{"an unlisted letter", []string{"b?", "a?", "c?", "d?", "g?", right}, []int{1}},
		{"a repeat after 3/3 is not harmful", []string{"b?", "c?", "d?", "g?", "g?", right}, nil},
		{"the last turn is the answer", []string{"b?", "b?", "b?", "b?", "b?", "b?"}, []int{1, 2, 3, 4}},
		{"a hasty answer", []string{TallyAnswer}, nil},
	} {
		e := sweetrl.NewEpisodeWith(task, TallyProtocol())
		for _, a := range tc.agent {
			if _, err := e.AgentTurn("", a); err != nil {
				t.Fatal(err)
			}
			if e.NeedsHuman() {
				r, _ := TallySimulator{}.Respond(context.Background(), task, e.Messages())
				if err := e.HumanTurn(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		var got []int
		for _, i := range TallyHarmful(task, e.History()) {
			got = append(got, (i-1)/2) // the task's statement, then agent and human turns
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: harmful agent turns %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTallyScripted checks the scripted agent: deterministic for a seed,
// valid episodes scored by the scorer, and its moves at the rates it
// states.
func TestTallyScripted(t *testing.T) {
	tasks := TallyTasks(3000, 4)
	trajs := TallyScriptedTrajectories(tasks, 1, 4)
	if again := TallyScriptedTrajectories(tasks[:50], 1, 4); !reflect.DeepEqual(again, trajs[:50]) {
		t.Error("the same seed gave other dialogues")
	}
	moves := map[string]map[TallyMove]int{"open": {}, "complete": {}}
	for i, tr := range trajs {
		if len(tr.DialogueHistory) == 0 || len(tr.DialogueHistory) > 2*TallyCandidates+2 || tr.Task.ProblemDescription != tasks[i].ProblemDescription {
			t.Fatalf("trajectory %d: %+v", i, tr)
		}
		sc, err := TallyScorer{}.Score(context.Background(), []sweetrl.Task{tr.Task}, []string{tr.Answer})
		if err != nil || sc[0].Reward != tr.Reward {
			t.Fatalf("trajectory %d: reward %v, scorer %v (%v)", i, tr.Reward, sc, err)
		}
		for j, turn := range tr.DialogueHistory {
			if turn.Role != sweetrl.RoleAssistant {
				continue
			}
			s := tallyStateOf(tr.Task, tr.DialogueHistory[:j])
			phase := "open"
			if s.count == NumKeys {
				phase = "complete"
			}
			switch {
			case strings.Contains(turn.Content, sweetrl.AnswerMarker):
				moves[phase][MoveAnswer]++
			case turn.Content == TallyNext:
				moves[phase][MoveNext]++
			default:
				moves[phase][MoveWaste]++
			}
		}
	}
	rate := func(m map[TallyMove]int, mv TallyMove) float64 {
		return float64(m[mv]) / float64(m[MoveNext]+m[MoveWaste]+m[MoveAnswer])
	}
	for _, tc := range []struct {
		phase string
		move  TallyMove
		want  float64
	}{
		{"open", MoveWaste, TallyWaste},
		{"open", MoveAnswer, TallyHasty},
		{"open", MoveNext, 1 - TallyWaste - TallyHasty},
		{"complete", MoveWaste, TallyLinger},
		{"complete", MoveAnswer, 1 - TallyLinger},
		{"complete", MoveNext, 0},
	} {
		if got := rate(moves[tc.phase], tc.move); math.Abs(got-tc.want) > 0.02 {
			t.Errorf("%s count, move %d: rate %.3f, want %.3f", tc.phase, tc.move, got, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a budget-family task with four letters did not panic")
		}
	}()
	TallyScriptedTrajectories([]sweetrl.Task{tallyOf("b c d g", "b d g")}, 1, 1)
}

// TestTallyStatistics checks the statistics on a small sample: imitating
// the successes lies strictly between the scripted success and the
// optimum, and the harmful turns are what makes it fall short.
func TestTallyStatistics(t *testing.T) {
	st := TallyStatistics(20000, 3)
	if st.Optimum != 1 {
		t.Errorf("optimum %v, want 1", st.Optimum)
	}
	if !(st.Scripted < st.Imitation && st.Imitation < st.Optimum-0.05) {
		t.Errorf("scripted %.3f, imitation %.3f, optimum %.3f: want scripted < imitation < optimum − 0.05", st.Scripted, st.Imitation, st.Optimum)
	}
	if st.HarmfulInSuccesses < 0.1 || st.HarmfulInFailures <= st.HarmfulInSuccesses || st.ImitationHarmful < 0.1 {
		t.Errorf("harmful turns in %.3f of successes, %.3f of failures, %.3f of imitation episodes", st.HarmfulInSuccesses, st.HarmfulInFailures, st.ImitationHarmful)
	}
	if math.Abs(st.LastKeyFifth-0.6) > 0.02 { // C(4,2)/C(5,3) of the key sets
		t.Errorf("last key fifth in %.3f of tasks, want 0.6", st.LastKeyFifth)
	}
	if st.Unseen > 0.05 {
		t.Errorf("%.3f of the imitating policy's turns were off the successes", st.Unseen)
	}
}

// TestImitationOfOptimalDialogues: a policy imitating the optimal policy's
// dialogues plays the optimum.
func TestImitationOfOptimalDialogues(t *testing.T) {
	tasks := TallyTasks(2000, 5)
	var opt []sweetrl.Trajectory
	for _, task := range tasks[:1000] {
		opt = append(opt, playTally(task, tallyOptimal))
	}
	im := ImitationPolicy(opt)
	rng := rand.New(rand.NewPCG(1, 2))
	for i, task := range tasks[1000:] {
		tr := playTally(task, func(s tallyState) string {
			r, ok := im.next(s, rng)
			if !ok {
				t.Fatalf("task %d: no optimal dialogue passed through %+v", i, s.turns)
			}
			return r
		})
		if tr.Reward != 1 {
			t.Fatalf("task %d: the imitation of the optimum failed: %+v", i, tr.DialogueHistory)
		}
	}
}
