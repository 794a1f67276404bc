// Package shapecheck says why a checkpoint does not fit the configuration
// a model was given, before anything is allocated: how many layers its
// tensor names hold, and which fields of the configuration give the
// extents in which a stored tensor's shape differs from the one the
// configuration makes.
package shapecheck

import (
	"fmt"
	"strconv"
	"strings"
)

// Extent is one dimension a configuration gives a tensor: its size and the
// field, or expression of fields, it comes from ("hidden_size",
// "num_attention_heads×head_dim").
type Extent struct {
	N     int
	Field string
}

// Blame names the fields behind the extents of want in which got differs
// ("hidden_size gives 64 where the tensor has 32"), all of them when the
// ranks differ, joined by commas; "" when got is want.
func Blame(want []Extent, got []int) string {
	var out []string
	for i, e := range want {
		switch {
		case len(got) != len(want):
			out = append(out, fmt.Sprintf("%s gives %d", e.Field, e.N))
		case got[i] != e.N:
			out = append(out, fmt.Sprintf("%s gives %d where the tensor has %d", e.Field, e.N, got[i]))
		}
	}
	return strings.Join(out, ", ")
}

// Layers returns the number of distinct layer indices among names, read as
// prefix followed by a decimal index and a dot ("model.layers.3.mlp…" with
// prefix "model.layers."); other names do not count.
func Layers(names []string, prefix string) int {
	seen := map[int]bool{}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(num); ok && err == nil && i >= 0 {
			seen[i] = true
		}
	}
	return len(seen)
}
