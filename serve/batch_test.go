package serve

import (
	"strings"
	"testing"
)

// TestTextStop feeds text piece by piece and checks what is let out, where
// the stop string is found, and that nothing let out is part of one.
func TestTextStop(t *testing.T) {
	for _, tc := range []struct {
		stops  []string
		pieces []string
		out    string // everything let out, flush included
		hit    bool
	}{
		{nil, []string{"ab", "c"}, "abc", false},
		{[]string{"END"}, []string{"hello E", "N", "D more"}, "hello ", true},
		{[]string{"END"}, []string{"hello E", "N", "x"}, "hello ENx", false},
		{[]string{"END"}, []string{"hello EN"}, "hello EN", false},
		{[]string{"xyz", "b"}, []string{"axy", "b"}, "axy", true},
		{[]string{"bc", "abcd"}, []string{"a", "b", "c"}, "a", true},
		{[]string{"\n\n"}, []string{"line\n", "\nnext"}, "line", true},
		{[]string{"é!"}, []string{"café", "!"}, "caf", true},
	} {
		ts := textStop{stops: tc.stops}
		var out strings.Builder
		hit := false
		for _, p := range tc.pieces {
			o, h := ts.push(p)
			out.WriteString(o)
			for _, s := range tc.stops {
				if strings.Contains(out.String(), s) {
					t.Errorf("stops %q, pieces %q: let out %q, which holds a stop string", tc.stops, tc.pieces, out.String())
				}
			}
			if h {
				hit = true
				break
			}
		}
		out.WriteString(ts.flush())
		if out.String() != tc.out || hit != tc.hit {
			t.Errorf("stops %q, pieces %q: %q (hit %v), want %q (hit %v)", tc.stops, tc.pieces, out.String(), hit, tc.out, tc.hit)
		}
	}
}
