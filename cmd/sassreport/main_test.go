package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunRefuses checks that what a user gets wrong is an error naming it.
func TestRunRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-lib", "no/such/lib.a"}, "no/such/lib.a"},
		{[]string{"-lib", "main.go", "-match", "("}, "-match"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-arch"}, "flag needs an argument"},
	} {
		var out bytes.Buffer
		err := run(c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
