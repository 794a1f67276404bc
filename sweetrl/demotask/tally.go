package demotask

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// The tally family: hidden keys among listed letters, under a turn budget,
// with a running tally in the human's replies.
//
// A task lists TallyCandidates letters from TallyLetters (a to z), of which
// NumKeys are keys; which ones is the hidden information and the ground
// truth:
//
//	problem:  Find the 3 keys among b c f k n.
//	hidden:   b f n
//
// The agent asks about one letter a turn: "next?" (TallyNext) asks about
// the first listed letter not yet asked, and a reply naming a letter ("c?")
// asks about that letter. TallySimulator answers "b: key" or "c: no" ("?"
// when the reply asks about no letter), followed by the tally: the number
// of keys the agent has asked about so far, "b: key (1/3)", and, once it
// reads 3/3, the keys, "f: key (3/3: b f n)". Whether to go on asking can
// thus be read off the last reply. The agent ends the episode by answering
// ("I WANT TO ANSWER: done", TallyAnswer), and its answer is the keys the
// human's replies revealed (TallyProtocol's Answer): the decision that
// matters in the answer turn is to answer, the text after the marker is
// not read. TallyScorer passes one unit test per key the answer names, and
// none when it names more than three letters; an episode that ends at the
// turn limit without the marker answers nothing.
//
// TallyProtocol allows six agent turns: enough to ask the five letters in
// order and answer, so an agent that asks each listed letter once, in
// order, until the count reads 3/3, then answers, always succeeds (the
// optimum), while a wasted turn taken before the count is complete (a
// letter asked again, a question asking about none) fails whenever the last
// key is the fifth letter, which the dialogue cannot show when the turn is
// taken and the ground truth can. The scripted dialogues hold such turns in
// successful trajectories too (when the keys came early), so imitating the
// successes copies them.

// Shape of the tally family.
const (
	// TallyLetters are the letters a tally task lists.
	TallyLetters = "abcdefghijklmnopqrstuvwxyz"
	// TallyCandidates is the number of letters a tally task lists.
	TallyCandidates = 5
	// TallyNumTasks is the number of distinct tally tasks: the 65780 lists
	// of five of the 26 letters, times the 10 ways to choose three keys
	// among them.
	TallyNumTasks = 65780 * 10
)

const tallyStream = 0x74616c6c79 // "tally"

// Probabilities of the tally family's scripted agent, decided afresh at
// every turn (see TallyScriptedTrajectories).
const (
	// TallyWaste is the probability of a wasted question while the count
	// is not complete.
	TallyWaste = 0.2
	// TallyHasty is the probability of answering, with guesses, while the
	// count is not complete.
	TallyHasty = 0.05
	// TallyLinger is the probability of asking again once the count is
	// complete, instead of answering.
	TallyLinger = 0.25
)

// TallyNext is the agent's question about the first listed letter it has
// not asked about.
const TallyNext = "next?"

// TallyAnswer is the scripted agent's answer. The text after the marker
// is not read: the answer is the keys the replies revealed.
const TallyAnswer = sweetrl.AnswerMarker + " done"

// TallyProtocol returns the tally family's episode rules: no system prompt,
// six agent turns, human replies cut to 400 characters, and the answer
// taken from the dialogue (tallyAnswer).
func TallyProtocol() sweetrl.Protocol {
	return sweetrl.Protocol{System: "", MaxTurns: TallyCandidates + 1, ReplyLimit: 400, Answer: tallyAnswer}
}

// tallyAnswer is the answer of a tally episode that has just ended: when
// its last agent turn holds the answer marker, the keys the human's replies
// revealed ("b: key"), in the order revealed, separated by spaces; "" when
// the episode ended at the turn limit without the marker.
func tallyAnswer(history []sweetrl.Turn) string {
	if len(history) == 0 || !strings.Contains(history[len(history)-1].Content, sweetrl.AnswerMarker) {
		return ""
	}
	var keys []byte
	for _, t := range history {
		if c := t.Content; t.Role == sweetrl.RoleUser && len(c) > 1 && strings.HasPrefix(c[1:], ": key") && !slices.Contains(keys, c[0]) {
			keys = append(keys, c[0])
		}
	}
	return spaced(keys)
}

// DescribeTally returns a short paragraph describing the tally family.
func DescribeTally() string {
	return "Each task lists five letters from a to z, three of which are keys " +
		`("Find the 3 keys among b c f k n."); the agent asks "next?" (the next listed letter) or names a letter, and the ` +
		`human answers "b: key" or "c: no" with the count of keys found ("b: key (1/3)"; at 3/3 the keys, ` +
		`"f: key (3/3: b f n)"). The agent ends by answering; the answer is the keys the replies revealed. Six turns are enough to ` +
		"ask every letter once and answer, so a wasted question before the count reads 3/3 fails whenever the " +
		"last key is the fifth letter."
}

// TallyTasks returns n distinct tally tasks, deterministically for a seed
// (the first n of a larger call). It panics unless 0 <= n <= TallyNumTasks.
func TallyTasks(n int, seed uint64) []sweetrl.Task {
	if n < 0 || n > TallyNumTasks {
		panic(fmt.Sprintf("demotask: %d tally tasks asked for; there are %d", n, TallyNumTasks))
	}
	rng := rand.New(rand.NewPCG(seed, tallyStream))
	tasks := make([]sweetrl.Task, 0, n)
	seen := make(map[string]bool, n)
	for len(tasks) < n {
		list := make([]byte, TallyCandidates)
		for i, p := range rng.Perm(len(TallyLetters))[:TallyCandidates] {
			list[i] = TallyLetters[p]
		}
		slices.Sort(list)
		var keys []byte
		for _, i := range rng.Perm(TallyCandidates)[:NumKeys] {
			keys = append(keys, list[i])
		}
		slices.Sort(keys)
		t := tallyTask(list, keys)
		if seen[t.ProblemDescription+t.HiddenInformation] {
			continue
		}
		seen[t.ProblemDescription+t.HiddenInformation] = true
		tasks = append(tasks, t)
	}
	return tasks
}

// tallyTask is the task listing list with the given keys (both sorted).
func tallyTask(list, keys []byte) sweetrl.Task {
	hidden := spaced(keys)
	tests := make([]sweetrl.TestCase, len(keys))
	for i, k := range keys {
		tests[i] = sweetrl.TestCase{Name: "test" + strconv.Itoa(i+1), Call: string(k)}
	}
	return sweetrl.Task{
		ProblemDescription: fmt.Sprintf("Find the %d keys among %s.", len(keys), spaced(list)),
		HiddenInformation:  hidden,
		GroundTruth:        hidden,
		TestCases:          tests,
	}
}

// spaced returns the letters separated by single spaces.
func spaced(letters []byte) string {
	var b strings.Builder
	for i, c := range letters {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// TallySplit is Split for the tally family.
func TallySplit(seed uint64, train, test int) (trainTasks, testTasks []sweetrl.Task) {
	if train < 0 || test < 0 || train+test > TallyNumTasks {
		panic(fmt.Sprintf("demotask: a split of %d train and %d test tasks; there are %d", train, test, TallyNumTasks))
	}
	all := TallyTasks(train+test, seed)
	return all[:train:train], all[train:]
}

// TallyListed returns the letters a tally task lists, in order.
func TallyListed(task sweetrl.Task) []byte {
	_, list, _ := strings.Cut(task.ProblemDescription, " among ")
	var out []byte
	for _, f := range strings.Fields(strings.TrimSuffix(list, ".")) {
		if len(f) == 1 {
			out = append(out, f[0])
		}
	}
	return out
}

// parseTally reads a tally task: its listed letters and its keys, which
// must be NumKeys distinct listed letters in order.
func parseTally(task sweetrl.Task) (listed, keys []byte, err error) {
	listed = TallyListed(task)
	if len(listed) != TallyCandidates {
		return nil, nil, fmt.Errorf("%q lists %d letters, want %d", task.ProblemDescription, len(listed), TallyCandidates)
	}
	fields := strings.Split(task.HiddenInformation, " ")
	if len(fields) != NumKeys {
		return nil, nil, fmt.Errorf("hidden information %q: %d keys, want %d", task.HiddenInformation, len(fields), NumKeys)
	}
	for i, f := range fields {
		if len(f) != 1 || !slices.Contains(listed, f[0]) || (i > 0 && f[0] <= keys[i-1]) {
			return nil, nil, fmt.Errorf("hidden information %q: %q is not a listed letter in order", task.HiddenInformation, f)
		}
		keys = append(keys, f[0])
	}
	return listed, keys, nil
}

// TallySimulator plays the human of the tally family. It reads the letter
// the last assistant message asks about (see tallyAsked) and answers
// "k: key" when it is a key of the task, "k: no" otherwise, and "?" when the
// message asks about no letter; then, after a space, the running tally
// "(n/3)", n being the number of distinct keys the agent's messages so far
// have asked about, or, once that is every key, "(3/3: b f n)" with the
// keys. It is stateless and deterministic.
type TallySimulator struct{}

var _ sweetrl.Simulator = TallySimulator{}

// Respond implements sweetrl.Simulator. It fails only when ctx is done,
// history holds no assistant message, or the task is not the family's.
func (TallySimulator) Respond(ctx context.Context, task sweetrl.Task, history []tokenizer.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	listed, keys, err := parseTally(task)
	if err != nil {
		return "", fmt.Errorf("tally simulator: %w", err)
	}
	var agent []string
	for _, m := range history {
		if m.Role == sweetrl.RoleAssistant {
			agent = append(agent, m.Content)
		}
	}
	if len(agent) == 0 {
		return "", errors.New("tally simulator: no agent message to answer")
	}
	asks := tallyAsked(listed, agent)
	found := map[byte]bool{}
	for _, k := range asks {
		if slices.Contains(keys, k) {
			found[k] = true
		}
	}
	part := "?"
	if k := asks[len(asks)-1]; k != 0 {
		part = string(k) + ": no"
		if slices.Contains(keys, k) {
			part = string(k) + ": key"
		}
	}
	if len(found) == len(keys) {
		return fmt.Sprintf("%s (%d/%d: %s)", part, len(found), len(keys), task.HiddenInformation), nil
	}
	return fmt.Sprintf("%s (%d/%d)", part, len(found), len(keys)), nil
}

// tallyAsked returns the letter each of the agent's messages asks about (0:
// none): its first lone letter (see Simulator), or, for a message with none
// that holds the word "next", the first listed letter that no earlier
// message asked about (0 once every listed letter has been).
func tallyAsked(listed []byte, agent []string) []byte {
	asked := map[byte]bool{}
	out := make([]byte, len(agent))
	for i, m := range agent {
		k, ok := firstLetter(m)
		if !ok && slices.ContainsFunc(strings.FieldsFunc(m, func(r rune) bool { return !unicode.IsLetter(r) }), func(w string) bool { return w == "next" }) {
			for _, c := range listed {
				if !asked[c] {
					k = c
					break
				}
			}
		}
		if k != 0 {
			asked[k] = true
		}
		out[i] = k
	}
	return out
}

// firstLetter returns the first lone letter of s (see loneLetters).
func firstLetter(s string) (byte, bool) {
	l := loneLetters(s)
	if len(l) == 0 {
		return 0, false
	}
	return l[0], true
}

// tallyCount reads the count n of the running tally "(n/3)" or "(3/3:
// keys)" at the end of a tally reply; ok is false when the reply has none.
func tallyCount(reply string) (n int, ok bool) {
	i := strings.LastIndexByte(reply, '(')
	if i < 0 || !strings.HasSuffix(reply, ")") {
		return 0, false
	}
	count, keys, listed := strings.Cut(reply[i+1:len(reply)-1], ": ")
	if listed && len(loneLetters(keys)) != NumKeys {
		return 0, false
	}
	num, den, found := strings.Cut(count, "/")
	if !found || den != strconv.Itoa(NumKeys) {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > NumKeys || listed != (n == NumKeys) {
		return 0, false
	}
	return n, true
}

// TallyScorer grades the tally family's answers: the distinct lone letters
// of the answer (see Simulator) are the keys it names. The i-th unit test
// passes when the answer names the i-th key, unless it names more than
// NumKeys letters, which passes none. The score is Passed of Total = 3
// with Reward Passed/3; Note says why an answer passed nothing: "no
// letters" or "more than 3 letters".
type TallyScorer struct{}

var _ sweetrl.Scorer = TallyScorer{}

// Score implements sweetrl.Scorer. It fails when ctx is done, when tasks
// and answers differ in length, or when a task is not the family's; the
// error names the task's index.
func (TallyScorer) Score(ctx context.Context, tasks []sweetrl.Task, answers []string) ([]sweetrl.Score, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(tasks) != len(answers) {
		return nil, fmt.Errorf("tally scorer: %d tasks but %d answers", len(tasks), len(answers))
	}
	scores := make([]sweetrl.Score, len(tasks))
	for i, task := range tasks {
		_, keys, err := parseTally(task)
		if err != nil {
			return nil, fmt.Errorf("tally scorer: task %d: %w", i, err)
		}
		scores[i] = tallyScore(keys, answers[i])
	}
	return scores, nil
}

// tallyScore grades one answer.
func tallyScore(keys []byte, answer string) sweetrl.Score {
	var named []byte
	for _, c := range loneLetters(answer) {
		if !slices.Contains(named, c) {
			named = append(named, c)
		}
	}
	s := sweetrl.Score{Total: len(keys)}
	switch {
	case len(named) == 0:
		s.Note = "no letters"
	case len(named) > len(keys):
		s.Note = fmt.Sprintf("more than %d letters", len(keys))
	default:
		for _, k := range keys {
			if slices.Contains(named, k) {
				s.Passed++
			}
		}
	}
	s.Reward = float64(s.Passed) / float64(s.Total)
	return s
}

// TallyScriptedTrajectories plays every tally task perTask times with a
// scripted agent, deterministically for a seed: the supervised start of a
// model. The agent decides afresh at every turn, from the last reply's
// count alone (no style is kept across turns, so a model that imitates
// each turn imitates the whole dialogue):
//
//   - while the count is below 3/3: with probability TallyWaste it wastes
//     the turn ("?"), with probability TallyHasty it answers at once
//     (TallyAnswer), and otherwise it asks "next?";
//   - once the count reads 3/3: with probability TallyLinger it wastes the
//     turn ("?"), and otherwise it answers.
//
// It does not count its turns: a question on the sixth turn is, as the
// protocol says, the answer (and fails). It panics if perTask is negative
// or a task is not the family's.
func TallyScriptedTrajectories(tasks []sweetrl.Task, perTask int, seed uint64) []sweetrl.Trajectory {
	if perTask < 0 {
		panic(fmt.Sprintf("demotask: %d scripted trajectories per task", perTask))
	}
	rng := rand.New(rand.NewPCG(seed, tallyStream+1))
	policy := tallyScripted(rng)
	out := make([]sweetrl.Trajectory, 0, len(tasks)*perTask)
	for i, task := range tasks {
		if _, _, err := parseTally(task); err != nil {
			panic(fmt.Sprintf("demotask: tally scripted trajectories: task %d: %v", i, err))
		}
		for range perTask {
			out = append(out, playTally(task, policy))
		}
	}
	return out
}

// tallyState is what a tally agent knows before a turn, read from the
// dialogue so far.
type tallyState struct {
	cands []byte         // the listed letters
	count int            // the last reply's count (0 before any)
	turns []sweetrl.Turn // the dialogue so far
}

// tallyStateOf reads the state of an episode of task from its dialogue.
func tallyStateOf(task sweetrl.Task, turns []sweetrl.Turn) tallyState {
	s := tallyState{cands: TallyListed(task), turns: turns}
	for _, t := range turns {
		if t.Role == sweetrl.RoleUser {
			s.count, _ = tallyCount(t.Content)
		}
	}
	return s
}

// say returns the reply that makes move m.
func (s tallyState) say(m TallyMove) string {
	switch m {
	case MoveNext:
		return TallyNext
	case MoveWaste:
		return "?"
	}
	return TallyAnswer
}

// TallyMove is a tally agent's kind of turn.
type TallyMove int

const (
	// MoveNext asks about the next listed letter not yet asked ("next?").
	MoveNext TallyMove = iota
	// MoveWaste asks about no letter ("?").
	MoveWaste
	// MoveAnswer answers (TallyAnswer).
	MoveAnswer
)

// tallyScripted returns the scripted agent's policy: a move drawn afresh
// at each turn from rng.
func tallyScripted(rng *rand.Rand) func(s tallyState) string {
	return func(s tallyState) string {
		u := rng.Float64()
		m := MoveNext
		switch {
		case s.count >= NumKeys && u < TallyLinger:
			m = MoveWaste
		case s.count >= NumKeys:
			m = MoveAnswer
		case u < TallyWaste:
			m = MoveWaste
		case u < TallyWaste+TallyHasty:
			m = MoveAnswer
		}
		return s.say(m)
	}
}

// tallyOptimal is the optimal policy of the tally family: ask the next
// letter until the count reads 3/3, then answer.
func tallyOptimal(s tallyState) string {
	if s.count >= NumKeys {
		return s.say(MoveAnswer)
	}
	return s.say(MoveNext)
}

// playTally plays one tally episode whose every agent reply policy gives.
func playTally(task sweetrl.Task, policy func(s tallyState) string) sweetrl.Trajectory {
	ctx := context.Background()
	_, keys, err := parseTally(task)
	if err != nil {
		panic("demotask: tally episode: " + err.Error())
	}
	e := sweetrl.NewEpisodeWith(task, TallyProtocol())
	for !e.Done() {
		agentTurn(e, policy(tallyStateOf(task, e.History())))
		if !e.NeedsHuman() {
			break
		}
		r, err := TallySimulator{}.Respond(ctx, task, e.Messages())
		if err != nil {
			panic("demotask: tally episode: " + err.Error())
		}
		if err := e.HumanTurn(r); err != nil {
			panic("demotask: tally episode: " + err.Error())
		}
	}
	return e.Trajectory(tallyScore(keys, e.Answer()).Reward)
}
