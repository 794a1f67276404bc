package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// BenchmarkAttention times the forward and the backward on packed training
// sequences (qLen == kLen): B sequences of T tokens, H query heads, G
// key/value heads of width Dh.
func BenchmarkAttention(b *testing.B) {
	for _, c := range []struct{ seqs, t, h, g, dh int }{
		{4, 256, 6, 6, 48},
		{1, 1024, 8, 2, 128},
	} {
		for _, dt := range []engine.DType{engine.F32, engine.BF16} {
			name := fmt.Sprintf("B%d_T%d_H%d_G%d_Dh%d/%v", c.seqs, c.t, c.h, c.g, c.dh, dt)
			be := New(Options{})
			r := enginetest.Rand(1)
			n := c.seqs * c.t
			q := engine.FromF32(be, dt, enginetest.Values(r, dt, n*c.h*c.dh, 1), n, c.h, c.dh)
			k := engine.FromF32(be, dt, enginetest.Values(r, dt, n*c.g*c.dh, 1), n, c.g, c.dh)
			v := engine.FromF32(be, dt, enginetest.Values(r, dt, n*c.g*c.dh, 1), n, c.g, c.dh)
			dOut := engine.FromF32(be, dt, enginetest.Values(r, dt, n*c.h*c.dh, 1), n, c.h, c.dh)
			out := engine.MustAlloc(be, dt, n, c.h, c.dh)
			dq := engine.MustAlloc(be, dt, n, c.h, c.dh)
			dk := engine.MustAlloc(be, dt, n, c.g, c.dh)
			dv := engine.MustAlloc(be, dt, n, c.g, c.dh)
			lse := engine.MustAlloc(be, engine.F32, n, c.h)
			var rows []int32
			for i := range c.seqs {
				rows = append(rows, int32(i*c.t), int32(c.t), int32(i*c.t), int32(c.t))
			}
			seqs := engine.FromI32(be, rows, c.seqs, 4)
			scale := engine.AttentionParams{Scale: float32(1 / math.Sqrt(float64(c.dh)))}
			b.Run(name+"/forward", func(b *testing.B) {
				for b.Loop() {
					be.Attention(out, lse, q, k, v, seqs, scale)
				}
			})
			be.Attention(out, lse, q, k, v, seqs, scale)
			b.Run(name+"/backward", func(b *testing.B) {
				for b.Loop() {
					be.AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs, scale)
				}
			})
		}
	}
}

// TestAttentionAnyWidth runs attention at head widths that are not a
// multiple of 8, where the C loops finish with their scalar tails.
func TestAttentionAnyWidth(t *testing.T) { enginetest.AttentionAnyWidth(t, New(Options{Threads: 3})) }

// TestAttentionRejectsBadSeqs checks that malformed rows of seqs panic with
// a message naming the row, and a wrong shape with one naming the shapes.
func TestAttentionRejectsBadSeqs(t *testing.T) {
	be := New(Options{Threads: 1})
	q := engine.MustAlloc(be, engine.F32, 8, 2, 4)
	k := engine.MustAlloc(be, engine.F32, 8, 1, 4)
	out := engine.MustAlloc(be, engine.F32, 8, 2, 4)
	lse := engine.MustAlloc(be, engine.F32, 8, 2)
	dk := engine.MustAlloc(be, engine.F32, 8, 1, 4)
	dv := engine.MustAlloc(be, engine.F32, 8, 1, 4)
	forward := func(rows []int32) func() {
		return func() {
			be.Attention(out, lse, q, k, k, engine.FromI32(be, rows, len(rows)/4, 4), engine.AttentionParams{Scale: 0.5})
		}
	}
	for _, c := range []struct {
		name string
		run  func()
		want string
	}{
		{"qLen > kLen", forward([]int32{0, 4, 0, 4, 4, 3, 4, 2}), "seqs row 1"},
		{"queries past q", forward([]int32{0, 4, 0, 4, 6, 3, 4, 3}), "seqs row 1"},
		{"keys past k", forward([]int32{0, 4, 0, 4, 4, 3, 6, 3}), "seqs row 1"},
		{"negative", forward([]int32{0, 4, 0, 4, 4, -1, 4, 3}), "seqs row 1"},
		{"overlapping queries", forward([]int32{0, 4, 0, 4, 3, 3, 4, 3}), "seqs row 1"},
		{"overlapping keys in the backward", func() {
			seqs := engine.FromI32(be, []int32{0, 4, 0, 4, 4, 3, 2, 3}, 2, 4)
			be.AttentionBackward(out, dk, dv, out, out, lse, q, k, k, seqs, engine.AttentionParams{Scale: 0.5})
		}, "seqs row 1"},
		{"out shape", func() {
			seqs := engine.FromI32(be, []int32{0, 4, 0, 4}, 1, 4)
			be.Attention(engine.MustAlloc(be, engine.F32, 8, 1, 4), lse, q, k, k, seqs, engine.AttentionParams{Scale: 0.5})
		}, "[8, 1, 4]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, c.want) {
					t.Errorf("panic %q, want one naming %q", msg, c.want)
				}
			}()
			c.run()
		})
	}
}

// TestAttentionThreadCountInvariance checks that the forward and the
// backward give bit-identical results with 1 and 3 threads: every output
// element is computed by one work item in a fixed order.
func TestAttentionThreadCountInvariance(t *testing.T) {
	const h, g, dh = 4, 2, 16
	seqRows := []int32{0, 70, 0, 70, 70, 5, 70, 9, 75, 33, 79, 40}
	nq, nk := 108, 119
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		r := enginetest.Rand(3)
		qv := enginetest.Values(r, dt, nq*h*dh, 1)
		kv := enginetest.Values(r, dt, nk*g*dh, 1)
		vv := enginetest.Values(r, dt, nk*g*dh, 1)
		gv := enginetest.Values(r, dt, nq*h*dh, 1)
		run := func(threads int) [][]float32 {
			be := New(Options{Threads: threads})
			q := engine.FromF32(be, dt, qv, nq, h, dh)
			k := engine.FromF32(be, dt, kv, nk, g, dh)
			v := engine.FromF32(be, dt, vv, nk, g, dh)
			dOut := engine.FromF32(be, dt, gv, nq, h, dh)
			seqs := engine.FromI32(be, seqRows, len(seqRows)/4, 4)
			out, lse := engine.MustAlloc(be, dt, nq, h, dh), engine.MustAlloc(be, engine.F32, nq, h)
			dq := engine.MustAlloc(be, dt, nq, h, dh)
			dk, dv := engine.MustAlloc(be, dt, nk, g, dh), engine.MustAlloc(be, dt, nk, g, dh)
			be.Attention(out, lse, q, k, v, seqs, engine.AttentionParams{Scale: 0.25})
			be.AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs, engine.AttentionParams{Scale: 0.25})
			return [][]float32{engine.ToF32(be, out), engine.ToF32(be, lse), engine.ToF32(be, dq), engine.ToF32(be, dk), engine.ToF32(be, dv)}
		}
		one, three := run(1), run(3)
		for i, name := range []string{"out", "lse", "dq", "dk", "dv"} {
			for j := range one[i] {
				if one[i][j] != three[i][j] {
					t.Errorf("%v %s[%d]: %v with 1 thread, %v with 3", dt, name, j, one[i][j], three[i][j])
					break
				}
			}
		}
	}
}
