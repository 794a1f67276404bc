package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMeanSD(t *testing.T) {
	m, sd := MeanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	// mean 5; sum of squares 32 over 7
	if m != 5 || math.Abs(sd-math.Sqrt(32.0/7)) > 1e-15 {
		t.Errorf("MeanSD = %v, %v; want 5, %v", m, sd, math.Sqrt(32.0/7))
	}
	if m, sd := MeanSD([]float64{3}); m != 3 || sd != 0 {
		t.Errorf("one value: %v, %v", m, sd)
	}
	if m, _ := MeanSD(nil); !math.IsNaN(m) {
		t.Errorf("no values: mean %v, want NaN", m)
	}
}

// TestMcNemar checks the exact test against binomial tails computed by
// hand (they agree with scipy.stats.binomtest(min(b, c), b + c).pvalue).
func TestMcNemar(t *testing.T) {
	for _, tc := range []struct {
		b, c int
		want float64
	}{
		{10, 2, 158.0 / 4096}, // 2·(1 + 12 + 66)/2^12
		{2, 10, 158.0 / 4096},
		{0, 6, 2.0 / 64},
		{1, 9, 22.0 / 1024},
		{5, 5, 1},
		{0, 0, 1},
		{0, 1, 1},
		{30, 10, 0.0022214337732293643}, // 2·P(X ≤ 10), X ~ Bin(40, 1/2)
	} {
		if got := McNemar(tc.b, tc.c); math.Abs(got-tc.want) > 1e-12*tc.want {
			t.Errorf("McNemar(%d, %d) = %.15g, want %.15g", tc.b, tc.c, got, tc.want)
		}
	}
}

func TestHolm(t *testing.T) {
	for _, tc := range []struct{ p, want []float64 }{
		{[]float64{0.01, 0.04, 0.03}, []float64{0.03, 0.06, 0.06}},
		{[]float64{0.02, 0.5}, []float64{0.04, 0.5}},
		{[]float64{0.4, 0.3, 0.2, 0.001}, []float64{0.6, 0.6, 0.6, 0.004}},
		{[]float64{0.9}, []float64{0.9}},
	} {
		got := Holm(tc.p)
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12 {
				t.Errorf("Holm(%v) = %v, want %v", tc.p, got, tc.want)
				break
			}
		}
	}
}

// TestPairedBootstrap checks the bootstrap on cases whose answer is known:
// constant differences (a degenerate interval, the smallest p), no
// difference (p = 1), one stratum of the differences 0 and 1 (resampled
// means 0, ½ and 1 with probabilities ¼, ½, ¼: interval [0, 1], p ½),
// strata resampled apart, and a large normal sample, where the interval
// and p-value approach the normal theory's.
func TestPairedBootstrap(t *testing.T) {
	b := PairedBootstrap([][]float64{{0.5, 0.5, 0.5}, {0.5}}, 999, 1)
	if b.Mean != 0.5 || b.Lo != 0.5 || b.Hi != 0.5 || b.P != 1.0/1000 || b.Units != 4 {
		t.Errorf("constant differences: %+v", b)
	}
	if b := PairedBootstrap([][]float64{{0, 0, 0}}, 500, 1); b.Mean != 0 || b.P != 1 {
		t.Errorf("no difference: %+v, want p = 1", b)
	}
	b = PairedBootstrap([][]float64{{0, 1}}, 40000, 2)
	if b.Mean != 0.5 || b.Lo != 0 || b.Hi != 1 || math.Abs(b.P-0.5) > 0.01 {
		t.Errorf("differences 0 and 1: %+v, want interval [0, 1] and p ≈ 0.5", b)
	}
	// Two strata of one unit each: every resample keeps both units.
	if b := PairedBootstrap([][]float64{{1}, {0}}, 100, 3); b.Lo != 0.5 || b.Hi != 0.5 {
		t.Errorf("one unit per stratum: %+v, want the interval [0.5, 0.5]", b)
	}
	// A large sample (mean about 0.04, sd about 1, n 2500): the normal
	// interval is mean ± 1.96·sd/√n and the p-value 2(1 − Φ(|mean|·√n/sd)).
	r := rand.New(rand.NewPCG(7, 8))
	xs := make([]float64, 2500)
	for i := range xs {
		xs[i] = 0.04 + r.NormFloat64()
	}
	m, sd := MeanSD(xs)
	b = PairedBootstrap([][]float64{xs}, 20000, 4)
	half := 1.96 * sd / math.Sqrt(float64(len(xs)))
	if math.Abs((b.Hi-b.Lo)/2-half) > 0.05*half || math.Abs((b.Hi+b.Lo)/2-m) > 0.1*half {
		t.Errorf("interval [%g, %g], want about %g ± %g", b.Lo, b.Hi, m, half)
	}
	z := math.Abs(m) / (sd / math.Sqrt(float64(len(xs))))
	wantP := math.Erfc(z / math.Sqrt2)
	if math.Abs(b.P-wantP) > 0.2*wantP+0.005 {
		t.Errorf("p = %g, want about %g (z = %.2f)", b.P, wantP, z)
	}
}
