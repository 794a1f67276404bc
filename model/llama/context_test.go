package llama

import "testing"

func TestFitNew(t *testing.T) {
	c := Config{MaxSeqLen: 100}
	for _, tc := range []struct {
		prompt, maxNew, want int
		capped               bool
	}{
		{10, 50, 50, false},
		{10, 90, 90, false},
		{10, 91, 90, true},
		{0, 100000000, 100, true},
		{100, 1, 0, true},
		{120, 5, -20, true},
	} {
		n, capped := c.FitNew(tc.prompt, tc.maxNew)
		if n != tc.want || capped != tc.capped {
			t.Errorf("FitNew(%d, %d) = %d, %v; want %d, %v", tc.prompt, tc.maxNew, n, capped, tc.want, tc.capped)
		}
	}
}
