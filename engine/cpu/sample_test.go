package cpu

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// sampleRowSorted is the top-k and nucleus rule by a full sort of the row,
// as this backend drew before the histogram prefilters: the ids must not
// change.
func sampleRowSorted(row []float32, u float32, p engine.SampleParams) int {
	total := expWeights(row, p.Temperature)
	topK, nucleus := p.TopK > 0 && p.TopK < len(row), p.TopP > 0 && p.TopP < 1
	if !topK && !nucleus {
		return drawIndexOrder(row, float64(u)*total)
	}
	order := make([]int32, len(row))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := cmp.Compare(row[y], row[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	if topK {
		order = order[:p.TopK]
		total = 0
		for _, j := range order {
			total += float64(row[j])
		}
	}
	keep, mass := len(order), total
	if nucleus {
		keep, mass = 0, 0.0
		for keep < len(order) {
			mass += float64(row[order[keep]])
			keep++
			if mass >= float64(p.TopP)*total {
				break
			}
		}
	}
	kept := make([]bool, len(row))
	for _, j := range order[:keep] {
		kept[j] = true
	}
	for j := range row {
		if !kept[j] {
			row[j] = 0
		}
	}
	return drawIndexOrder(row, float64(u)*mass)
}

// TestSampleNucleusPrefilter: the top-k and the nucleus found by ranking
// only the heavy tokens draw what ranking the whole row draws, on rows with
// many ties (coarse grids), smooth rows, peaked and flat ones, top-p near 0
// and 1, and k from 1 to V − 1 alone and with top-p.
func TestSampleNucleusPrefilter(t *testing.T) {
	b := New(Options{})
	draws := 8
	if testing.Short() { // the race detector's pass, where 8 draws took 24 s (3 s plain)
		draws = 2
	}
	for _, cs := range []struct {
		v, grid int
		step    float32
	}{{50, 4, 0.25}, {4099, 8, 0.25}, {20011, 64, 0.0625}, {128256, 1 << 20, 1e-5}, {30000, 1, 1}, {1000, 200, 0.5}} {
		for _, sp := range []engine.SampleParams{{Temperature: 1, TopP: 0.9}, {Temperature: 0.7, TopP: 0.5}, {Temperature: 2, TopP: 0.01},
			{Temperature: 1, TopP: 0.999999}, {Temperature: 0.3, TopP: 0.3},
			{Temperature: 1, TopK: 1}, {Temperature: 0.7, TopK: 40}, {Temperature: 1.5, TopK: cs.v - 1},
			{Temperature: 1, TopK: 50, TopP: 0.9}, {Temperature: 2, TopK: 1000, TopP: 0.5}} {
			t.Run(fmt.Sprintf("V=%d_grid=%d/T=%g_k=%d_p=%g", cs.v, cs.grid, sp.Temperature, sp.TopK, sp.TopP), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.v*7 + cs.grid))
				row := make([]float32, cs.v)
				for k := range draws {
					for j := range row {
						row[j] = float32(r.IntN(cs.grid)) * cs.step
					}
					u := float32(r.Float64())
					want := sampleRowSorted(append([]float32(nil), row...), u, sp)
					if got := b.sampleRow(0, append([]float32(nil), row...), u, sp); got != want {
						t.Fatalf("draw %d (u=%g): %d, the full sort draws %d", k, u, got, want)
					}
				}
			})
		}
	}
}
