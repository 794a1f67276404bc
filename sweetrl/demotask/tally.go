package demotask

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// The tally family: hidden keys among distractors, under a turn budget,
// with a running tally in the human's replies.
//
// A task lists TallyCandidates letters, of which NumKeys are keys with a
// hidden digit, as the budget family's do:
//
//	problem:  Need digits for 3 of b c d g h.
//	hidden:   b=4 d=0 g=7
//
// The agent asks about one letter a turn ("b?"). TallySimulator answers the
// first letter the reply names, "b=4" for a key and "no c" for any other
// letter ("?" when it names none), followed by the tally: the number of
// keys the agent has asked about so far, "(1/3)", and, once it reads 3/3,
// every key with its digit, "(3/3: b=4 d=0 g=7)"; before that, while a
// listed letter is left that the agent has not asked, "next" and the first
// such letter: "b=4 (1/3) next c". Which letter to ask, whether to stop
// and what to answer can thus be read off the last reply. The answer is the
// keys family's, "I WANT TO ANSWER: b=4 d=0 g=7", graded by Scorer.
//
// TallyProtocol allows six agent turns: enough to ask the five letters in
// order and answer, so an agent that asks each listed letter once, in
// order, until the count reads 3/3, then answers, always succeeds (the
// optimum), while a wasted turn taken before the count is complete (a
// letter asked again, or a question naming none) fails whenever the last
// key is the fifth letter, which the dialogue cannot show when the turn is
// taken and the ground truth can. The scripted dialogues hold such turns in
// successful trajectories too (when the keys came early), so imitating the
// successes copies them.

// TallyCandidates is the number of letters a tally task lists.
const TallyCandidates = 5

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

// TallyProtocol returns the tally family's episode rules: no system prompt,
// six agent turns, human replies cut to 400 characters.
func TallyProtocol() sweetrl.Protocol {
	return sweetrl.Protocol{System: "", MaxTurns: TallyCandidates + 1, ReplyLimit: 400}
}

// DescribeTally returns a short paragraph describing the tally family.
func DescribeTally() string {
	return "Each task lists five letters from a to h, three of which are keys with a hidden digit " +
		`("Need digits for 3 of b c d g h."); the human answers the first letter a reply names, "b=4" for a key ` +
		`and "no c" otherwise, with the count of keys found and the next letter not yet asked ("b=4 (1/3) next c"; at 3/3 the keys ` +
		`and digits, "g=7 (3/3: b=4 d=0 g=7)"). The answer is "I WANT TO ANSWER: b=4 d=0 g=7". Six turns are enough to ` +
		`ask every letter once and answer, so a wasted ` +
		"question before the count reads 3/3 fails whenever the last key is the fifth letter."
}

// TallyNumTasks is the number of distinct tally tasks: the 56 lists of
// five letters, times the 10 ways to choose three keys among them, times
// the 1000 ways to give the keys digits.
const TallyNumTasks = 56 * 10 * 1000

// TallyTasks returns n distinct tally tasks, deterministically for a seed
// (the first n of a larger call). It panics unless 0 <= n <= TallyNumTasks.
func TallyTasks(n int, seed uint64) []sweetrl.Task {
	return candidateTasks(n, seed, tallyStream, TallyCandidates, TallyNumTasks)
}

// TallySplit is Split for the tally family.
func TallySplit(seed uint64, train, test int) (trainTasks, testTasks []sweetrl.Task) {
	if train < 0 || test < 0 || train+test > TallyNumTasks {
		panic(fmt.Sprintf("demotask: a split of %d train and %d test tasks; there are %d", train, test, TallyNumTasks))
	}
	all := TallyTasks(train+test, seed)
	return all[:train:train], all[train:]
}

// TallyRightAnswer returns the right answer of a tally task: the marker
// and its ground truth, "I WANT TO ANSWER: b=4 d=0 g=7".
func TallyRightAnswer(task sweetrl.Task) string {
	return sweetrl.AnswerMarker + " " + task.GroundTruth
}

// TallySimulator plays the human of the tally family. It reads the last
// assistant message and answers the first letter from "a" to "z" in it
// that stands alone (see Simulator): "k=v" when the letter is a key of the
// task, v its hidden digit, "no k" otherwise, and "?" when the message
// names no letter; then, after a space, the running tally "(n/3)", n being
// the number of distinct keys the agent's messages so far have asked about
// (the first lone letter of each), or, once every key has been asked,
// "(3/3: b=4 d=0 g=7)" with the task's hidden pairs; then, before that, if
// a listed letter is left that no agent message has asked about, " next "
// and the first of them in the list. It is stateless and deterministic.
type TallySimulator struct{}

var _ sweetrl.Simulator = TallySimulator{}

// Respond implements sweetrl.Simulator. It fails only when ctx is done,
// history holds no assistant message, or the task's hidden information is
// not the family's.
func (TallySimulator) Respond(ctx context.Context, task sweetrl.Task, history []tokenizer.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	hidden, err := parseHidden(task.HiddenInformation)
	if err != nil {
		return "", fmt.Errorf("tally simulator: %w", err)
	}
	digit := func(k byte) (byte, bool) {
		for _, p := range hidden {
			if p.key == k {
				return p.digit, true
			}
		}
		return 0, false
	}
	found, asked := map[byte]bool{}, map[byte]bool{}
	last := -1
	for i, m := range history {
		if m.Role != sweetrl.RoleAssistant {
			continue
		}
		last = i
		if k, ok := firstLetter(m.Content); ok {
			asked[k] = true
			if _, key := digit(k); key {
				found[k] = true
			}
		}
	}
	if last < 0 {
		return "", errors.New("tally simulator: no agent message to answer")
	}
	part := "?"
	if k, ok := firstLetter(history[last].Content); ok {
		if d, key := digit(k); key {
			part = string([]byte{k, '=', d})
		} else {
			part = "no " + string(k)
		}
	}
	if len(found) == len(hidden) {
		return fmt.Sprintf("%s (%d/%d: %s)", part, len(found), len(hidden), task.HiddenInformation), nil
	}
	reply := fmt.Sprintf("%s (%d/%d)", part, len(found), len(hidden))
	for _, c := range BudgetCandidateLetters(task) {
		if !asked[c] {
			return reply + " next " + string(c), nil
		}
	}
	return reply, nil
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
// pairs)" of a tally reply (the last parenthesis, at its end or before
// " next x"); ok is false when the reply has none.
func tallyCount(reply string) (n int, ok bool) {
	i := strings.LastIndexByte(reply, '(')
	j := strings.LastIndexByte(reply, ')')
	if i < 0 || j < i {
		return 0, false
	}
	if rest := reply[j+1:]; rest != "" && (len(rest) != 7 || !strings.HasPrefix(rest, " next ")) {
		return 0, false
	}
	count, pairs, listed := strings.Cut(reply[i+1:j], ": ")
	if listed && len(parsePairs(pairs)) != NumKeys {
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

// TallyScriptedTrajectories plays every tally task perTask times with a
// scripted agent, deterministically for a seed: the supervised start of a
// model. The agent decides afresh at every turn, from the last reply's
// count alone (no style is kept across turns, so a model that imitates
// each turn imitates the whole dialogue):
//
//   - while the count is below 3/3: with probability TallyWaste it wastes
//     the turn (asks again the letter it asked last, or "?" before any),
//     with probability TallyHasty it answers at once, guessing the digits
//     it does not know uniformly, and otherwise it asks the next listed
//     letter it has not asked ("b?");
//   - once the count reads 3/3: with probability TallyLinger it asks the
//     last letter again, and otherwise it answers with the digits the
//     replies gave.
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
		if err := checkTally(task); err != nil {
			panic(fmt.Sprintf("demotask: tally scripted trajectories: task %d: %v", i, err))
		}
		for range perTask {
			out = append(out, playTally(task, policy))
		}
	}
	return out
}

// checkTally reports whether task is a tally task.
func checkTally(task sweetrl.Task) error {
	if _, err := parseHidden(task.HiddenInformation); err != nil {
		return err
	}
	if n := len(BudgetCandidateLetters(task)); n != TallyCandidates {
		return fmt.Errorf("%d listed letters, want %d", n, TallyCandidates)
	}
	return nil
}

// tallyState is what a tally agent knows before a turn, read from the
// dialogue so far.
type tallyState struct {
	hidden []pair         // the task's keys and digits (to place guesses)
	cands  []byte         // the listed letters
	next   byte           // the first listed letter not yet asked (0: none)
	last   byte           // the letter asked last (0: none)
	count  int            // the last reply's count (0 before any)
	known  map[byte]byte  // digits the replies gave
	turns  []sweetrl.Turn // the dialogue so far
}

// tallyStateOf reads the state of an episode of task from its dialogue.
func tallyStateOf(task sweetrl.Task, hidden []pair, turns []sweetrl.Turn) tallyState {
	s := tallyState{hidden: hidden, cands: BudgetCandidateLetters(task), known: map[byte]byte{}, turns: turns}
	asked := map[byte]bool{}
	for _, t := range turns {
		if t.Role == sweetrl.RoleAssistant {
			if k, ok := firstLetter(t.Content); ok {
				asked[k], s.last = true, k
			}
			continue
		}
		for _, p := range parsePairs(t.Content) {
			s.known[p.key] = p.digit
		}
		s.count, _ = tallyCount(t.Content)
	}
	for _, c := range s.cands {
		if !asked[c] {
			s.next = c
			break
		}
	}
	return s
}

// say returns the reply that makes move m; guesses come from guess.
func (s tallyState) say(m TallyMove, guess *rand.Rand) string {
	switch m {
	case MoveNext:
		if s.next != 0 {
			return string(s.next) + "?"
		}
		fallthrough // every letter asked: asking again is all there is
	case MoveWaste:
		if s.last == 0 {
			return "?"
		}
		return string(s.last) + "?"
	}
	pairs := make([]string, len(s.hidden))
	for i, p := range s.hidden {
		d, ok := s.known[p.key]
		if !ok {
			d = byte('0' + guess.IntN(10))
		}
		pairs[i] = string([]byte{p.key, '=', d})
	}
	return sweetrl.AnswerMarker + " " + strings.Join(pairs, " ")
}

// TallyMove is a tally agent's kind of turn.
type TallyMove int

const (
	// MoveNext asks the next listed letter not yet asked.
	MoveNext TallyMove = iota
	// MoveWaste asks again the letter asked last ("?" before any).
	MoveWaste
	// MoveAnswer answers with the digits known and guesses for the rest.
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
		return s.say(m, rng)
	}
}

// tallyOptimal is the optimal policy of the tally family: ask the next
// letter until the count reads 3/3, then answer (no guess is ever made).
func tallyOptimal(s tallyState) string {
	if s.count >= NumKeys {
		return s.say(MoveAnswer, nil)
	}
	return s.say(MoveNext, nil)
}

// playTally plays one tally episode whose every agent reply policy gives.
func playTally(task sweetrl.Task, policy func(s tallyState) string) sweetrl.Trajectory {
	ctx := context.Background()
	hidden, err := parseHidden(task.HiddenInformation)
	if err != nil {
		panic("demotask: tally episode: " + err.Error())
	}
	e := sweetrl.NewEpisodeWith(task, TallyProtocol())
	for !e.Done() {
		agentTurn(e, policy(tallyStateOf(task, hidden, e.History())))
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
	return e.Trajectory(score(hidden, e.Answer()).Reward)
}

// candidateTasks returns n distinct tasks listing cands letters of which
// NumKeys are keys, drawn from the PCG stream stream. It panics unless
// 0 <= n <= limit.
func candidateTasks(n int, seed, stream uint64, cands, limit int) []sweetrl.Task {
	if n < 0 || n > limit {
		panic(fmt.Sprintf("demotask: %d tasks asked for; at most %d", n, limit))
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	tasks := make([]sweetrl.Task, 0, n)
	seen := make(map[string]bool, n)
	for len(tasks) < n {
		list := make([]byte, cands)
		for i, p := range rng.Perm(len(Letters))[:cands] {
			list[i] = Letters[p]
		}
		slices.Sort(list)
		var keys []byte
		for _, i := range rng.Perm(cands)[:NumKeys] {
			keys = append(keys, list[i])
		}
		slices.Sort(keys)
		digits := make([]int, NumKeys)
		for i := range digits {
			digits[i] = rng.IntN(10)
		}
		t := newTask(keys, digits)
		names := make([]string, len(list))
		for i, c := range list {
			names[i] = string(c)
		}
		t.ProblemDescription = fmt.Sprintf("Need digits for %d of %s.", NumKeys, strings.Join(names, " "))
		if seen[t.ProblemDescription+t.HiddenInformation] {
			continue
		}
		seen[t.ProblemDescription+t.HiddenInformation] = true
		tasks = append(tasks, t)
	}
	return tasks
}
