package cpu

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// RoPE implements engine.Backend.RoPE.
func (b *Backend) RoPE(x, pos, invFreq *engine.Tensor) { b.rope("RoPE", x, pos, invFreq, 1) }

// RoPEBackward implements engine.Backend.RoPEBackward: the same rotation by
// the negated angle.
func (b *Backend) RoPEBackward(dx, pos, invFreq *engine.Tensor) {
	b.rope("RoPEBackward", dx, pos, invFreq, -1)
}

// rope rotates every head of every token of x by sign·angle, in place. Each
// goroutine takes a block of tokens and computes a token's cos/sin once for
// all its heads.
func (b *Backend) rope(op string, x, pos, invFreq *engine.Tensor, sign float32) {
	n, h, dh := engine.RoPEShape(op, x, pos, invFreq)
	half := dh / 2
	xs, ps, fs := floatsOf(x), i32s(pos), f32s(invFreq)
	b.parallel(n, 4, func(w, lo, hi int) {
		buf := b.scratchOf(w, 2*half+dh)
		cs, sn, row := buf[:half], buf[half:2*half], buf[2*half:]
		for i := lo; i < hi; i++ {
			p := float32(ps[i])
			for j, f := range fs {
				s, c := math.Sincos(float64(p * f))
				cs[j], sn[j] = float32(c), sign*float32(s)
			}
			for hd := 0; hd < h; hd++ {
				off := (i*h + hd) * dh
				r := xs.load(off, dh, row)
				x1, x2 := r[:half], r[half:]
				for j := range x1 {
					a, bb := x1[j], x2[j]
					x1[j] = a*cs[j] - bb*sn[j]
					x2[j] = bb*cs[j] + a*sn[j]
				}
				xs.store(off, r)
			}
		}
	})
}
