package cpu

import (
	"math"
	"slices"

	"github.com/turnwise/turnwise/engine"
)

// Sample implements engine.Backend.Sample; rows in parallel.
func (b *Backend) Sample(ids, logits, u *engine.Tensor, p engine.SampleParams) {
	n, v := engine.SampleShape(ids, logits, u)
	out, us, lg := i32s(ids), f32s(u), floatsOf(logits)
	b.parallel(n, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, v)
		for i := lo; i < hi; i++ {
			row := lg.load(i*v, v, buf)
			if lg.dt == engine.F32 {
				row = append(buf[:0], row...) // keep the caller's logits intact
			}
			out[i] = int32(b.sampleRow(w, row, us[i], p))
		}
	})
}

// sampleRow draws one index from row (which it overwrites) with uniform u,
// as worker w (whose key scratch it uses).
func (b *Backend) sampleRow(w int, row []float32, u float32, p engine.SampleParams) int {
	if p.Temperature <= 0 {
		best := 0
		for j, x := range row {
			if x > row[best] {
				best = j
			}
		}
		return best
	}
	total := expWeights(row, p.Temperature)
	topK, nucleus := p.TopK > 0 && p.TopK < len(row), p.TopP > 0 && p.TopP < 1
	if !topK && !nucleus {
		return drawIndexOrder(row, float64(u)*total)
	}
	// Rank by weight, descending, ties by index; keep the TopK first, then
	// the shortest prefix of those whose running sum (f64, in rank order)
	// reaches TopP·(their total).
	var keys []uint64
	var keep int
	var mass float64
	if topK {
		keys = heaviest(row, p.TopK, b.keys[w][:0])
		keep = len(keys)
		for _, key := range keys {
			mass += float64(keyWeight(key))
		}
		if nucleus {
			keep, mass = prefixReaching(keys, float64(p.TopP)*mass)
		}
	} else {
		target := float64(p.TopP) * total
		var ok bool
		keys, keep, mass, ok = nucleusPrefix(row, target, b.keys[w][:0])
		if !ok { // the heavy tokens fell short: rank them all (all are kept if the sum never reaches target)
			keys, keep, mass, _ = rankedPrefix(row, target, 0, keys[:0])
		}
	}
	// Zero the tokens outside the candidates (every key after the last kept
	// one in the ranking), then draw in index order.
	lastKept := keys[keep-1]
	for j, e := range row {
		if rankKey(e, j) > lastKept {
			row[j] = 0
		}
	}
	b.keys[w] = keys // kept for the worker's next row
	return drawIndexOrder(row, float64(u)*mass)
}

// rankKey orders the tokens of a row of non-negative weights heaviest first,
// lower index first among equal weights: ascending keys are that ranking
// (the bits of a non-negative float order like its value).
func rankKey(e float32, j int) uint64 {
	return uint64(^math.Float32bits(e))<<32 | uint64(uint32(j))
}

// keyWeight is the weight of a rankKey.
func keyWeight(key uint64) float32 { return math.Float32frombits(^uint32(key >> 32)) }

// rankedPrefix ranks the tokens whose weight bits are at least minBits and
// returns their keys in rank order, with the length keep of the shortest
// prefix whose running sum in that order reaches target, and that sum; when
// even all of them fall short, keep is all of them and ok is false.
func rankedPrefix(row []float32, target float64, minBits uint32, keys []uint64) ([]uint64, int, float64, bool) {
	for j, e := range row {
		if math.Float32bits(e) >= minBits {
			keys = append(keys, rankKey(e, j))
		}
	}
	slices.Sort(keys)
	keep, mass := prefixReaching(keys, target)
	return keys, keep, mass, mass >= target
}

// prefixReaching returns the length of the shortest prefix of keys (in rank
// order) whose running sum of weights (f64, in that order) reaches target,
// and that sum; all of keys and their sum when none does.
func prefixReaching(keys []uint64, target float64) (int, float64) {
	mass := 0.0
	for k, key := range keys {
		mass += float64(keyWeight(key))
		if mass >= target {
			return k + 1, mass
		}
	}
	return len(keys), mass
}

// heaviest returns the keys of the k heaviest tokens of row (0 < k <
// len(row)) in rank order. A histogram of the weights by their top 16 bits
// finds the highest bucket from which the tokens of all heavier ones number
// at least k; only the tokens from that bucket up are ranked.
func heaviest(row []float32, k int, keys []uint64) []uint64 {
	var hist [1 << 15]int32 // finite weights are ≤ 1: top 16 bits ≤ 0x3f80
	for _, e := range row {
		hist[math.Float32bits(e)>>16&(1<<15-1)]++
	}
	top, n := len(hist)-1, 0
	for ; top > 0; top-- {
		if n += int(hist[top]); n >= k {
			break
		}
	}
	for j, e := range row {
		if math.Float32bits(e)>>16 >= uint32(top) {
			keys = append(keys, rankKey(e, j))
		}
	}
	slices.Sort(keys)
	return keys[:k]
}

// nucleusPrefix is rankedPrefix over just the heaviest tokens that can hold
// the nucleus: a histogram of the weights by their top 16 bits (f64 sums
// per bucket) finds the highest bucket from which the mass of all heavier
// ones reaches target with a margin far above the rounding of either sum;
// the tokens from that bucket up are ranked (a prefix of the full ranking,
// so the running sums and the result are those of ranking every token).
// ok is false when the margin is not met.
func nucleusPrefix(row []float32, target float64, keys []uint64) ([]uint64, int, float64, bool) {
	var hist [1 << 15]float64 // finite weights are ≤ 1: top 16 bits ≤ 0x3f80
	for _, e := range row {
		hist[math.Float32bits(e)>>16&(1<<15-1)] += float64(e)
	}
	need := target * (1 + 1e-9)
	above := 0.0
	for top := len(hist) - 1; top >= 0; top-- {
		above += hist[top]
		if above >= need {
			return rankedPrefix(row, target, uint32(top)<<16, keys)
		}
	}
	return keys, 0, 0, false
}

// drawIndexOrder returns the first index at which the running sum of the
// weights exceeds target, or the last positive weight's index when rounding
// leaves target at the very end of the sum.
func drawIndexOrder(row []float32, target float64) int {
	var c float64
	for j, e := range row {
		c += float64(e)
		if c > target {
			return j
		}
	}
	return lastPositive(row)
}

// lastPositive returns the last index with a positive weight.
func lastPositive(row []float32) int {
	for j := len(row) - 1; j >= 0; j-- {
		if row[j] > 0 {
			return j
		}
	}
	return 0
}

// expWeights replaces row by its unnormalised probabilities exp((x − max)/T)
// and returns their sum, accumulated in f64 in index order.
func expWeights(row []float32, temperature float32) float64 {
	m := float32(math.Inf(-1))
	for _, x := range row {
		m = max(m, x)
	}
	inv := 1 / temperature
	var total float64
	for j, x := range row {
		e := float32(math.Exp(float64((x - m) * inv)))
		row[j] = e
		total += float64(e)
	}
	return total
}
