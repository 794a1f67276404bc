package commtest

import (
	"slices"
	"strings"
	"testing"
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
