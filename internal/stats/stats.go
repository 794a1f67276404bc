// Package stats holds the tests the demo's tables use to compare two
// methods evaluated on the same tasks: a paired bootstrap over tasks
// (stratified, for several training seeds), McNemar's exact test over
// paired binary outcomes, Holm's correction for several comparisons, and
// the mean and sample standard deviation.
package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// MeanSD returns the mean of xs and its sample standard deviation
// (divisor n − 1; 0 for fewer than two values). Both are NaN for no values.
func MeanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// Bootstrap is the result of a paired bootstrap test.
type Bootstrap struct {
	Mean  float64 `json:"mean"` // the mean paired difference over every unit
	Lo    float64 `json:"lo"`   // its 95% percentile interval
	Hi    float64 `json:"hi"`
	P     float64 `json:"p"`     // two-sided p-value of the null hypothesis of no difference
	Units int     `json:"units"` // units (tasks) over all strata
	Draws int     `json:"resamples"`
}

// PairedBootstrap tests whether paired differences have mean 0. strata
// holds the differences d = a − b of each unit (a task: one method's
// success on it minus the other's), grouped in strata (one per training
// seed) that are resampled apart: each of draws resamples takes, in every
// stratum, as many units as it holds, with replacement, and computes the
// mean over all of them. The interval is the resampled means' 2.5 and 97.5
// percentiles; the p-value is that of the resampled means shifted to mean
// 0 (the null hypothesis) lying at least as far from 0 as the observed
// mean, (1 + count) / (1 + draws). The draws are seeded.
func PairedBootstrap(strata [][]float64, draws int, seed uint64) Bootstrap {
	n := 0
	var sum float64
	for _, s := range strata {
		n += len(s)
		for _, d := range s {
			sum += d
		}
	}
	if n == 0 || draws < 1 {
		panic(fmt.Sprintf("stats: a paired bootstrap of %d units and %d resamples", n, draws))
	}
	b := Bootstrap{Mean: sum / float64(n), Units: n, Draws: draws}
	rng := rand.New(rand.NewPCG(seed, 0x626f6f74))
	means := make([]float64, draws)
	far := 0
	for k := range means {
		var s float64
		for _, st := range strata {
			for range st {
				s += st[rng.IntN(len(st))]
			}
		}
		means[k] = s / float64(n)
		if math.Abs(means[k]-b.Mean) >= math.Abs(b.Mean)-1e-12 {
			far++
		}
	}
	slices.Sort(means)
	b.Lo, b.Hi = quantile(means, 0.025), quantile(means, 0.975)
	b.P = float64(1+far) / float64(1+draws)
	return b
}

// quantile returns the q-quantile of sorted xs, linearly interpolated
// between order statistics (the default of R and NumPy).
func quantile(xs []float64, q float64) float64 {
	h := q * float64(len(xs)-1)
	i := int(math.Floor(h))
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (h-float64(i))*(xs[i+1]-xs[i])
}

// McNemar returns the two-sided p-value of McNemar's exact test for paired
// binary outcomes: b pairs where only the first succeeded, c where only the
// second did. Under the null hypothesis b is Binomial(b + c, 1/2); the
// p-value is twice the smaller tail, at most 1 (1 when b + c = 0).
func McNemar(b, c int) float64 {
	if b < 0 || c < 0 {
		panic(fmt.Sprintf("stats: McNemar with %d and %d discordant pairs", b, c))
	}
	n, k := b+c, min(b, c)
	if n == 0 {
		return 1
	}
	// P(X ≤ k) for X ~ Binomial(n, 1/2), summed in logs.
	var tail float64
	for i := 0; i <= k; i++ {
		tail += math.Exp(lchoose(n, i) - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*tail)
}

// lchoose is log(n choose k).
func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// Holm returns the p-values adjusted by Holm's step-down method for a
// family of comparisons: the i-th smallest p is multiplied by m − i (i
// from 0), made non-decreasing in that order and capped at 1. A
// comparison is significant at level α when its adjusted p-value is at
// most α; the family-wise error rate is then at most α.
func Holm(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case p[a] < p[b]:
			return -1
		case p[a] > p[b]:
			return 1
		}
		return 0
	})
	adj := make([]float64, m)
	run := 0.0
	for i, k := range order {
		run = math.Max(run, math.Min(1, float64(m-i)*p[k]))
		adj[k] = run
	}
	return adj
}
