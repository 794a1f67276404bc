package sweetrl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Preference losses of SWEET-RL, as functions of the sequence scores the
// model computes: both the critic's Bradley–Terry loss and the actor's
// turn-wise DPO loss are −log σ(β·margin) on a difference of log-ratios
// against a frozen reference.

// logSigmoidNeg returns −log σ(x) = log(1 + e^(−x)), stable for any x.
func logSigmoidNeg(x float64) float64 {
	if x > 0 {
		return math.Log1p(math.Exp(-x))
	}
	return -x + math.Log1p(math.Exp(x))
}

// sigmoid returns 1/(1+e^(−x)), stable for any x.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// PreferenceLoss is −log σ(β·[(θ⁺ − ref⁺) − (θ⁻ − ref⁻)]) for a chosen (⁺)
// and a rejected (⁻) sample scored by the trained model (θ) and the frozen
// reference (ref), with its gradients with respect to θ⁺ and θ⁻ (the
// reference gets none). For the critic the scores are mean log-probabilities
// over agent-turn tokens (the Bradley–Terry loss over trajectories); for the
// actor they are summed log-probabilities of one turn's action tokens (the
// DPO loss). β is 0.1 in the reference.
func PreferenceLoss(thetaPos, refPos, thetaNeg, refNeg, beta float64) (loss, dThetaPos, dThetaNeg float64) {
	x := beta * ((thetaPos - refPos) - (thetaNeg - refNeg))
	loss = logSigmoidNeg(x)
	g := -beta * sigmoid(-x) // d loss / d thetaPos
	return loss, g, -g
}

// DPOWithNLL adds to the actor's DPO loss the reference's NLL term:
// coef·(−mean log-probability of the chosen action's tokens), given that
// mean. It returns the loss and its gradients with respect to the chosen
// action's summed log-probability θ⁺ (as DPO sees it), the chosen action's
// mean log-probability (as the NLL term sees it), and the rejected θ⁻.
func DPOWithNLL(thetaPos, refPos, thetaNeg, refNeg, meanPos, beta, coef float64) (loss, dThetaPos, dMeanPos, dThetaNeg float64) {
	l, gp, gn := PreferenceLoss(thetaPos, refPos, thetaNeg, refNeg, beta)
	return l - coef*meanPos, gp, -coef, gn
}

// Pair is a preference: index Chosen over index Rejected.
type Pair struct{ Chosen, Rejected int }

// PairsByReward forms the critic's training pairs, as indices, from the
// rewards of the trajectories of one task, as the reference does: when the
// best reward is 1, the first trajectory reaching it is chosen against
// every trajectory with a strictly lower reward; otherwise the task gives
// no pairs. rl.CriticPairs turns them into the critic's sequence pairs.
func PairsByReward(rewards []float64) []Pair {
	best, first := math.Inf(-1), -1
	for i, r := range rewards {
		if r > best {
			best, first = r, i
		}
	}
	if best != 1 {
		return nil
	}
	var pairs []Pair
	for i, r := range rewards {
		if r < best {
			pairs = append(pairs, Pair{Chosen: first, Rejected: i})
		}
	}
	return pairs
}

// PairsByAdvantage forms the actor's pairs for one turn, as indices, from
// its candidates' advantages: candidates are ranked by advantage (ties by
// index), and each of n pairs sets a uniformly drawn candidate of the top
// half against one of the bottom half (the reference forms 4 pairs from 16
// candidates). With an odd count the middle candidate belongs to neither
// half. Fewer than two candidates give no pairs. rl.ActorPairs turns them
// into the actor's sequence pairs.
func PairsByAdvantage(advantages []float64, n int, r *rand.Rand) []Pair {
	if len(advantages) < 2 || n <= 0 {
		return nil
	}
	order := make([]int, len(advantages))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return advantages[order[a]] > advantages[order[b]] })
	half := len(order) / 2
	top, bottom := order[:half], order[len(order)-half:]
	pairs := make([]Pair, n)
	for k := range pairs {
		pairs[k] = Pair{Chosen: top[r.IntN(half)], Rejected: bottom[r.IntN(half)]}
	}
	return pairs
}

// TurnAdvantage is SWEET-RL's advantage of a candidate action: the critic's
// mean log-probability of it (with the ground truth in its prompt and the
// dialogue so far) minus a baseline's mean log-probability of it — the
// sampling policy's without the ground truth in the released code, the
// critic's frozen reference's with it in the paper (Eq. 3).
func TurnAdvantage(criticMeanLogP, policyMeanLogP float64) float64 {
	return criticMeanLogP - policyMeanLogP
}

// CriticPrefix is the training-time information the critic sees before the
// chat-templated dialogue, in the reference's words.
func CriticPrefix(groundTruth string) string {
	return fmt.Sprintf("In light that the final answer is: %s.", groundTruth)
}
