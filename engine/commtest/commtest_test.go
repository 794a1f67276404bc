package commtest

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

func TestParseSizes(t *testing.T) {
	cases := []struct {
		in      string
		want    []float64
		wantErr string
	}{
		{"", nil, ""},
		{"1,16,64", []float64{1, 16, 64}, ""},
		{" 0.5 , ,2", []float64{0.5, 2}, ""},
		{"1,x", nil, `"x" is not`},
		{"0", nil, `"0" is not`},
		{"-3", nil, `"-3" is not`},
	}
	for _, c := range cases {
		got, err := ParseSizes(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseSizes(%q): error %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestLocal runs Check — every collective against plain sums — on the
// ranks of Local, one goroutine each, for jobs of 1 to 3 ranks.
func TestLocal(t *testing.T) {
	for _, size := range []int{1, 2, 3} {
		bs := make([]engine.Backend, size)
		for r := range bs {
			bs[r] = cpu.New(cpu.Options{Threads: 1})
		}
		cs := Local(bs)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = Check(bs[r], cs[r], 1001)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Errorf("%d ranks, rank %d: %v", size, r, err)
			}
		}
	}
}
