package metrics

import (
	"math"
	"testing"
	"time"
)

func TestTrainFLOPsAndMFU(t *testing.T) {
	tests := []struct {
		name            string
		frozen, trained int64
		tokens          int
		seconds, peak   float64
		wantFPT         float64
		wantMFU         float64
	}{
		// 6·1e6 FLOPs a token, 1000 tokens in 2 s: 3e9 FLOP/s of a 1e10 peak.
		{"full", 0, 1_000_000, 1000, 2, 1e10, 6e6, 0.3},
		// LoRA: 4·1e6 + 6·1e4 = 4.06e6 a token; 500 tokens in 0.5 s of a 1e10 peak.
		{"lora", 1_000_000, 10_000, 500, 0.5, 1e10, 4.06e6, 0.406},
		{"no peak", 0, 10, 1, 1, 0, 60, 0},
	}
	for _, tc := range tests {
		fpt := TrainFLOPsPerToken(tc.frozen, tc.trained)
		if fpt != tc.wantFPT {
			t.Errorf("%s: %g FLOPs a token, want %g", tc.name, fpt, tc.wantFPT)
		}
		if got := MFUOf(tc.tokens, tc.seconds, fpt, tc.peak); math.Abs(got-tc.wantMFU) > 1e-12 {
			t.Errorf("%s: MFU %g, want %g", tc.name, got, tc.wantMFU)
		}
	}
}

// TestMeter checks the values a Meter adds against a hand-computed step:
// 1200 tokens in 0.4 s at 5e6 FLOPs a token, against a 1e11 peak, 3 s
// after the start.
func TestMeter(t *testing.T) {
	now := time.Unix(100, 0)
	m := NewMeter(MeterOptions{FLOPsPerToken: 5e6, PeakFLOPS: 1e11,
		Pool: func() (int, int) { return 4096, 3000 },
		Now:  func() time.Time { return now }})
	now = now.Add(3 * time.Second)
	vals := map[string]float64{}
	m.Add(vals, 1200, 0.4)
	want := map[string]float64{TokensPerS: 3000, WallS: 3, MFU: 3000 * 5e6 / 1e11, PoolPeakBytes: 4096, PoolHighWater: 3000}
	for k, w := range want {
		if math.Abs(vals[k]-w) > 1e-12*w {
			t.Errorf("%s = %g, want %g", k, vals[k], w)
		}
	}
	if !(vals[GoHeapBytes] > 0) || !(vals[GoSysBytes] >= vals[GoHeapBytes]) {
		t.Errorf("Go heap peak %g, runtime bytes %g", vals[GoHeapBytes], vals[GoSysBytes])
	}
	// Without a peak or a FLOP count, MFU is left out, not guessed.
	vals = map[string]float64{}
	NewMeter(MeterOptions{FLOPsPerToken: 5e6}).Add(vals, 10, 1)
	if _, ok := vals[MFU]; ok {
		t.Error("MFU recorded without a peak")
	}
}
