package sweetrl

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestPreferenceLoss checks the loss against hand-computed values and its
// gradients against central differences.
func TestPreferenceLoss(t *testing.T) {
	cases := []struct {
		tp, rp, tn, rn, beta, want float64
	}{
		// margin 0: −log σ(0) = log 2
		{-1, -1, -2, -2, 0.1, math.Ln2},
		// β·margin = 0.1·((−1 − −2) − (−3 − −2)) = 0.2: log(1 + e^−0.2)
		{-1, -2, -3, -2, 0.1, math.Log(1 + math.Exp(-0.2))},
		// a large negative margin: ≈ |x| = 50
		{-100, 0, 400, 0, 0.1, 50 + math.Log1p(math.Exp(-50))},
		// a large positive margin: ≈ 0, no overflow
		{1000, 0, -1000, 0, 1, 0},
	}
	for _, c := range cases {
		l, gp, gn := PreferenceLoss(c.tp, c.rp, c.tn, c.rn, c.beta)
		if math.Abs(l-c.want) > 1e-12*(1+c.want) {
			t.Errorf("loss(%v) = %v, want %v", c, l, c.want)
		}
		const h = 1e-6
		fp := func(tp, tn float64) float64 { l, _, _ := PreferenceLoss(tp, c.rp, tn, c.rn, c.beta); return l }
		numP := (fp(c.tp+h, c.tn) - fp(c.tp-h, c.tn)) / (2 * h)
		numN := (fp(c.tp, c.tn+h) - fp(c.tp, c.tn-h)) / (2 * h)
		if math.Abs(gp-numP) > 1e-6 || math.Abs(gn-numN) > 1e-6 {
			t.Errorf("gradients (%v, %v), finite differences (%v, %v)", gp, gn, numP, numN)
		}
	}
	// The hand-computed gradient at margin 0: −β·σ(0) = −β/2.
	if _, gp, gn := PreferenceLoss(0, 0, 0, 0, 0.1); gp != -0.05 || gn != 0.05 {
		t.Errorf("gradients at margin 0: %v, %v; want −0.05, 0.05", gp, gn)
	}
	l, gp, gm, gn := DPOWithNLL(0, 0, 0, 0, -2, 0.1, 0.01)
	if math.Abs(l-(math.Ln2+0.02)) > 1e-12 || gp != -0.05 || gm != -0.01 || gn != 0.05 {
		t.Errorf("DPO+NLL = %v (%v, %v, %v)", l, gp, gm, gn)
	}
}

func TestCriticPairs(t *testing.T) {
	cases := []struct {
		rewards []float64
		want    []Pair
	}{
		{[]float64{0.5, 1, 0, 1, 0.9}, []Pair{{1, 0}, {1, 2}, {1, 4}}}, // first success chosen; the other success is no pair
		{[]float64{0.5, 0.9, 0}, nil},                                  // no success: no pairs
		{[]float64{1, 1}, nil},                                         // nothing strictly worse
		{[]float64{0, 1}, []Pair{{1, 0}}},
		{nil, nil},
	}
	for _, c := range cases {
		if got := PairsByReward(c.rewards); !reflect.DeepEqual(got, c.want) {
			t.Errorf("PairsByReward(%v) = %v, want %v", c.rewards, got, c.want)
		}
	}
}

func TestActorPairs(t *testing.T) {
	adv := make([]float64, 16)
	for i := range adv {
		adv[i] = float64((i * 7) % 16) // a permutation of 0…15
	}
	r := rand.New(rand.NewPCG(1, 2))
	pairs := PairsByAdvantage(adv, 4, r)
	if len(pairs) != 4 {
		t.Fatalf("%d pairs, want 4", len(pairs))
	}
	for _, p := range pairs {
		if !(adv[p.Chosen] >= 8 && adv[p.Rejected] < 8) {
			t.Errorf("pair %v: advantages %v vs %v cross the halves", p, adv[p.Chosen], adv[p.Rejected])
		}
	}
	again := PairsByAdvantage(adv, 4, rand.New(rand.NewPCG(1, 2)))
	if !reflect.DeepEqual(pairs, again) {
		t.Error("the same seed formed different pairs")
	}
	// Odd count: the median is in neither half.
	for _, p := range PairsByAdvantage([]float64{3, 1, 2}, 20, r) {
		if p.Chosen != 0 || p.Rejected != 1 {
			t.Errorf("3 candidates: pair %v, want {0 1}", p)
		}
	}
	if PairsByAdvantage([]float64{1}, 4, r) != nil {
		t.Error("one candidate formed pairs")
	}
	if got := TurnAdvantage(-1.5, -2); got != 0.5 {
		t.Errorf("TurnAdvantage = %v", got)
	}
	if got := CriticPrefix("def f(): pass"); got != "In light that the final answer is: def f(): pass." {
		t.Errorf("CriticPrefix = %q", got)
	}
}
