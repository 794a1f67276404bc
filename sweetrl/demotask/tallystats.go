package demotask

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
)

// TallyStats are the tally family's statistics computed from its scripted
// dialogues alone, with no model: what the family asks of a learner,
// measured before any method runs on it.
type TallyStats struct {
	// Dialogues is the number of scripted dialogues measured, one per task.
	Dialogues int
	// Scripted is the share of them that succeed (reward 1), MeanReward
	// their mean reward.
	Scripted, MeanReward float64
	// Optimum is the success of the optimal policy on the same tasks (ask
	// the listed letters in order until the count reads 3/3, then answer).
	Optimum float64
	// Imitation is the success of imitating the successful dialogues
	// exactly: a policy that, after each dialogue so far, draws its next
	// move with the frequencies the successful scripted dialogues show
	// after the same dialogue (see ImitationPolicy), played on
	// ImitationEpisodes fresh tasks.
	Imitation         float64
	ImitationEpisodes int
	// Unseen is the share of the imitating policy's turns whose dialogue
	// so far no successful scripted dialogue passed through; such turns are
	// played as the scripted agent plays them.
	Unseen float64
	// HarmfulInSuccesses is the share of the successful scripted dialogues
	// that hold a harmful turn (see TallyHarmful); HarmfulInFailures that
	// of the failed ones.
	HarmfulInSuccesses, HarmfulInFailures float64
	// ImitationHarmful is the share of the imitating policy's episodes
	// that hold a harmful turn.
	ImitationHarmful float64
	// LastKeyFifth is the share of the tasks whose last key is the fifth
	// listed letter: where any harmful turn fails the task.
	LastKeyFifth float64
}

// TallyStatistics computes the tally family's statistics from n scripted
// dialogues (one per task of TallyTasks(n, seed), played with
// TallyScriptedTrajectories and that seed), the imitating policy being
// estimated from their successes and played on the next n tasks of the
// family's seeded order.
func TallyStatistics(n int, seed uint64) TallyStats {
	tasks := TallyTasks(2*n, seed)
	scripted := TallyScriptedTrajectories(tasks[:n], 1, seed)
	st := TallyStats{Dialogues: n, ImitationEpisodes: n}
	var succ, fail, harmS, harmF, opt, fifth int
	var reward float64
	for i, tr := range scripted {
		reward += tr.Reward
		harmful := len(TallyHarmful(tr.Task, tr.DialogueHistory)) > 0
		if tr.Reward == 1 {
			succ++
			if harmful {
				harmS++
			}
		} else {
			fail++
			if harmful {
				harmF++
			}
		}
		if playTally(tasks[i], tallyOptimal).Reward == 1 {
			opt++
		}
		if lastKey(tasks[i]) == TallyCandidates-1 {
			fifth++
		}
	}
	st.Scripted, st.MeanReward = ratio(succ, n), reward/float64(n)
	st.Optimum, st.LastKeyFifth = ratio(opt, n), ratio(fifth, n)
	st.HarmfulInSuccesses = ratio(harmS, succ)
	st.HarmfulInFailures = ratio(harmF, fail)

	im := ImitationPolicy(scripted)
	rng := rand.New(rand.NewPCG(seed, tallyStream+3))
	var turns, unseen, won, harm int
	for _, task := range tasks[n:] {
		tr := playTally(task, func(s tallyState) string {
			turns++
			reply, ok := im.next(s, rng)
			if !ok {
				unseen++
				reply = tallyScripted(rng)(s)
			}
			return reply
		})
		if tr.Reward == 1 {
			won++
		}
		if len(TallyHarmful(task, tr.DialogueHistory)) > 0 {
			harm++
		}
	}
	st.Imitation = ratio(won, n)
	st.Unseen = ratio(unseen, turns)
	st.ImitationHarmful = ratio(harm, n)
	return st
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// lastKey returns the index, among a tally task's listed letters, of its
// last key.
func lastKey(task sweetrl.Task) int {
	cands, keys, _ := parseTally(task)
	last := -1
	for _, k := range keys {
		last = max(last, slices.Index(cands, k))
	}
	return last
}

// TallyHarmful returns the indices (into turns) of the harmful agent turns
// of a tally dialogue: the turns taken while the running count was below
// 3/3 that neither ask about a listed letter not yet asked nor answer (a
// letter asked again, an unlisted letter, a question asking about none).
// Each costs one of the six turns the optimum needs when the last key is
// the fifth letter, and the dialogue so far cannot tell whether it is: in
// the task that shares the dialogue up to that turn but whose remaining
// keys come last, the same turn fails. The last agent turn of an episode is
// its answer, however it reads, and is never counted.
func TallyHarmful(task sweetrl.Task, turns []sweetrl.Turn) []int {
	cands := TallyListed(task)
	var agent []string
	var at []int
	for i, t := range turns {
		if t.Role == sweetrl.RoleAssistant {
			agent = append(agent, t.Content)
			at = append(at, i)
		}
	}
	asks := tallyAsked(cands, agent)
	asked := map[byte]bool{}
	count := 0
	var out []int
	a := 0
	for i, t := range turns {
		if t.Role != sweetrl.RoleAssistant {
			count, _ = tallyCount(t.Content)
			continue
		}
		k := asks[a]
		a++
		if i == at[len(at)-1] || strings.Contains(t.Content, sweetrl.AnswerMarker) {
			continue
		}
		useful := k != 0 && slices.Contains(cands, k) && !asked[k]
		if k != 0 {
			asked[k] = true
		}
		if !useful && count < NumKeys {
			out = append(out, i)
		}
	}
	return out
}

// Imitation is a policy that imitates a set of tally dialogues exactly:
// after each dialogue so far (in canonical form: which listed letter each
// agent turn asked, or that it asked none or an unlisted one, or answered,
// and whether each reply revealed a key), it draws the next move with the
// frequencies those dialogues show after the same dialogue.
type Imitation struct {
	moves map[string]map[string]int // canonical dialogue so far → next move → count
}

// ImitationPolicy returns the policy imitating the successful (reward 1)
// dialogues of trajs, which must be tally dialogues.
func ImitationPolicy(trajs []sweetrl.Trajectory) Imitation {
	im := Imitation{moves: map[string]map[string]int{}}
	for _, tr := range trajs {
		if tr.Reward != 1 {
			continue
		}
		cands := TallyListed(tr.Task)
		var prefix strings.Builder
		for _, t := range tr.DialogueHistory {
			if t.Role != sweetrl.RoleAssistant {
				prefix.WriteString(canonicalReply(t.Content))
				continue
			}
			mv := canonicalMove(cands, t.Content)
			m := im.moves[prefix.String()]
			if m == nil {
				m = map[string]int{}
				im.moves[prefix.String()] = m
			}
			m[mv]++
			prefix.WriteString(mv)
		}
	}
	return im
}

// next draws the imitated move in state s and returns its reply; ok is
// false when no imitated dialogue passed through s's dialogue.
func (im Imitation) next(s tallyState, rng *rand.Rand) (reply string, ok bool) {
	var prefix strings.Builder
	for _, t := range s.turns {
		if t.Role == sweetrl.RoleAssistant {
			prefix.WriteString(canonicalMove(s.cands, t.Content))
		} else {
			prefix.WriteString(canonicalReply(t.Content))
		}
	}
	m := im.moves[prefix.String()]
	if len(m) == 0 {
		return "", false
	}
	keys := make([]string, 0, len(m))
	total := 0
	for k, c := range m {
		keys = append(keys, k)
		total += c
	}
	slices.Sort(keys) // a fixed order, so that the draws repeat
	u := rng.IntN(total)
	for _, k := range keys {
		if u -= m[k]; u < 0 {
			return s.sayCanonical(k, rng), true
		}
	}
	panic("unreachable")
}

// canonicalMove is the canonical form of an agent turn: "A" for an answer,
// "N" for a question about the next letter (TallyNext: no letter named,
// the word "next"), the index of the listed letter it names ("0"…"4"), "x"
// for an unlisted letter, "?" for none.
func canonicalMove(cands []byte, text string) string {
	if strings.Contains(text, sweetrl.AnswerMarker) {
		return "A"
	}
	k, ok := firstLetter(text)
	if !ok {
		if tallyAsked(cands, []string{text})[0] != 0 {
			return "N"
		}
		return "?"
	}
	if i := slices.Index(cands, k); i >= 0 {
		return fmt.Sprint(i)
	}
	return "x"
}

// canonicalReply is the canonical form of a tally reply: "n" when it names
// a letter that is not a key, "?" when it names none, "k" when it reveals a
// key, "-" for any other text (the task's statement).
func canonicalReply(text string) string {
	switch {
	case strings.HasPrefix(text, "? "):
		return "?"
	case len(text) > 1 && strings.HasPrefix(text[1:], ": no"):
		return "n"
	case len(text) > 1 && strings.HasPrefix(text[1:], ": key"):
		return "k"
	}
	return "-"
}

// sayCanonical returns the reply making the canonical move mv in state s.
func (s tallyState) sayCanonical(mv string, rng *rand.Rand) string {
	switch {
	case mv == "A":
		return s.say(MoveAnswer)
	case mv == "N":
		return TallyNext
	case mv == "?":
		return "?"
	case mv == "x":
		for _, c := range []byte(TallyLetters) {
			if !slices.Contains(s.cands, c) {
				return string(c) + "?"
			}
		}
	}
	return string(s.cands[mv[0]-'0']) + "?"
}
