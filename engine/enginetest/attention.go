package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// attnCase is one attention configuration: heads, head width and the
// sequences, each (qStart, qLen, kStart, kLen).
type attnCase struct {
	name      string
	h, g      int // query heads, key/value heads
	dh        int
	nq, nk    int // rows of q and k; 0: the end of the furthest sequence
	seqs      [][4]int
	scale     float64 // 0: 1/sqrt(dh)
	nonCausal bool    // every query sees all its sequence's keys
	grad      bool    // also check the backward against finite differences
	f32Only   bool
}

// packed lays training sequences (qLen == kLen) of the given lengths end to
// end, queries and keys at the same rows.
func packed(lens ...int) [][4]int {
	var out [][4]int
	at := 0
	for _, n := range lens {
		out = append(out, [4]int{at, n, at, n})
		at += n
	}
	return out
}

// decodeBatch is n sequences decoding one token each over caches of
// different lengths: more sequences than a GPU warp scans at once.
func decodeBatch(n int) [][4]int {
	var out [][4]int
	k := 0
	for i := 0; i < n; i++ {
		kl := 1 + (7*i)%23
		out = append(out, [4]int{i, 1, k, kl})
		k += kl
	}
	return out
}

// The forward is compared with the float64 reference on every case: out
// within Tol(dt), lse (computed in f32 from the same rounded inputs whatever
// the dtype) within TolF32. Gradient checks sample 48 coordinates of each of
// q, k and v on the small cases, which cover every GQA ratio, head widths 8,
// 64 and 128, several query and key blocks, decoding and prefill over a
// cache, and uncovered rows, causal and non-causal (a vision transformer's
// 50-token sequences among them). The flash-style implementations keep O(T·block)
// memory, which the interface cannot observe; the long case at least runs
// a sequence far past any block size against the reference.
func testAttention(t *testing.T, b engine.Backend) {
	cases := []attnCase{
		{name: "one seq T=7 H=G=2 dh8", h: 2, g: 2, dh: 8, seqs: packed(7), grad: true},
		{name: "packed 1,7,37 H4/G1 dh8", h: 4, g: 1, dh: 8, seqs: packed(1, 7, 37), scale: 0.5, grad: true},
		{name: "packed 5,13 H8/G1 dh64", h: 8, g: 1, dh: 64, seqs: packed(5, 13), grad: true},
		{name: "packed 9,3 H4/G1 dh128", h: 4, g: 1, dh: 128, seqs: packed(9, 3), grad: true},
		{name: "one seq T=130 H2/G1 dh8", h: 2, g: 1, dh: 8, seqs: packed(130), grad: true},
		{name: "decode H4/G2 dh8", h: 4, g: 2, dh: 8, scale: 0.2, grad: true,
			seqs: [][4]int{{0, 1, 0, 9}, {1, 1, 9, 17}, {2, 1, 26, 1}}},
		{name: "prefill with cache H4/G2 dh8", h: 4, g: 2, dh: 8, grad: true,
			seqs: [][4]int{{0, 5, 0, 12}, {5, 70, 12, 100}}},
		{name: "uncovered rows H4/G1 dh8", h: 4, g: 1, dh: 8, nq: 20, nk: 30, grad: true,
			seqs: [][4]int{{10, 6, 12, 9}, {2, 5, 3, 5}, {16, 0, 22, 4}}},
		{name: "packed 64,65,1 H=G=2 dh64", h: 2, g: 2, dh: 64, seqs: packed(64, 65, 1)},
		{name: "packed 37,130,1 H8/G2 dh128", h: 8, g: 2, dh: 128, seqs: packed(37, 130, 1)},
		// Three heads per group: row numbers by a division that is no shift.
		{name: "packed 45,70 H6/G2 dh64", h: 6, g: 2, dh: 64, seqs: packed(45, 70)},
		// A negative scale (a kernel may take its row maxima before scaling).
		{name: "negative scale packed 1,7,37 H4/G2 dh8", h: 4, g: 2, dh: 8, seqs: packed(1, 7, 37), scale: -0.5,
			grad: true},
		{name: "negative scale decode and prefill H8/G2 dh128", h: 8, g: 2, dh: 128, scale: -0.09,
			seqs: [][4]int{{0, 1, 0, 300}, {1, 40, 300, 170}}},
		{name: "decode and prefill over caches H8/G1 dh128", h: 8, g: 1, dh: 128,
			seqs: [][4]int{{0, 1, 0, 300}, {1, 1, 300, 77}, {2, 100, 377, 203}}},
		{name: "long T=1030 H2/G1 dh64", h: 2, g: 1, dh: 64, seqs: packed(1030)},
		{name: "decode batch of 40 H4/G1 dh16", h: 4, g: 1, dh: 16, seqs: decodeBatch(40)},
		// Long enough caches that a flash-decoding kernel splits them by
		// default (the CUDA kernels: 2 chunks, one of them empty for the
		// 1-key cache).
		{name: "decode over long caches H8/G1 dh128", h: 8, g: 1, dh: 128, scale: 0.15,
			seqs: [][4]int{{0, 1, 0, 900}, {1, 1, 900, 1}, {2, 1, 901, 700}, {3, 1, 1601, 600}}},
		{name: "non-causal one seq T=7 H=G=2 dh8", h: 2, g: 2, dh: 8, seqs: packed(7), nonCausal: true, grad: true},
		{name: "non-causal packed 50,50,3 H4/G4 dh64", h: 4, g: 4, dh: 64, seqs: packed(50, 50, 3),
			nonCausal: true, grad: true},
		{name: "non-causal packed 1,37,70 H4/G2 dh8", h: 4, g: 2, dh: 8, seqs: packed(1, 37, 70), scale: 0.5,
			nonCausal: true, grad: true},
		{name: "non-causal queries over more keys H4/G2 dh8", h: 4, g: 2, dh: 8, nonCausal: true, grad: true,
			seqs: [][4]int{{0, 5, 0, 12}, {5, 70, 12, 100}, {75, 1, 112, 9}}},
		{name: "non-causal uncovered rows H4/G1 dh8", h: 4, g: 1, dh: 8, nq: 20, nk: 30, nonCausal: true, grad: true,
			seqs: [][4]int{{10, 6, 12, 9}, {2, 5, 3, 5}, {16, 0, 22, 4}}},
		{name: "non-causal packed 37,130,1 H8/G2 dh128", h: 8, g: 2, dh: 128, seqs: packed(37, 130, 1), nonCausal: true},
	}
	for ci, c := range cases {
		for _, dt := range FloatDTypes {
			if c.f32Only && dt != engine.F32 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", c.name, dt), func(t *testing.T) {
				attentionCase(t, b, c, dt, uint64(100+ci))
			})
		}
	}
}

// AttentionAnyWidth runs cases at head widths that are not a multiple of 8
// (a vector loop's tail), decoding over caches of several chunks and
// prefill, grouped and not, forward and backward, against the float64
// reference: for a backend whose attention takes any head width (the CPU's;
// the CUDA kernels take multiples of 8 up to 128).
func AttentionAnyWidth(t *testing.T, b engine.Backend) {
	cases := []attnCase{
		{name: "decode and prefill H4/G2 dh12", h: 4, g: 2, dh: 12, grad: true,
			seqs: [][4]int{{0, 1, 0, 150}, {1, 1, 150, 3}, {2, 9, 153, 20}}},
		{name: "decode H3/G3 dh21", h: 3, g: 3, dh: 21, scale: 0.2,
			seqs: [][4]int{{0, 1, 0, 300}, {1, 1, 300, 1}}},
	}
	for i, c := range cases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%v", c.name, dt), func(t *testing.T) { attentionCase(t, b, c, dt, uint64(400+i)) })
		}
	}
}

// AttentionTunables runs bf16 forward cases at head width 128 (Llama's,
// where kernels have tunable tiles) against the float64 reference, each
// twice (same bits): a causal sequence spanning several query and key tiles
// of every size, two packed causal sequences at Llama's 4 heads per group,
// a non-causal pair, and a decoding batch of different cache
// lengths (flash-decoding's key chunks: several per sequence, some empty). A
// backend whose attention kernels take a configuration runs it once per
// configuration.
func AttentionTunables(t *testing.T, b engine.Backend) {
	cases := []attnCase{
		{name: "T=150 H4/G2 dh128", h: 4, g: 2, dh: 128, seqs: packed(150)},
		// Llama's 4 heads per group, several query tiles per sequence with
		// a partial last one, two sequences packed.
		{name: "packed 70,201 H8/G2 dh128", h: 8, g: 2, dh: 128, seqs: packed(70, 201)},
		{name: "non-causal packed 33,70 H2/G2 dh128", h: 2, g: 2, dh: 128, seqs: packed(33, 70), nonCausal: true},
		{name: "decode batch H8/G2 dh128", h: 8, g: 2, dh: 128,
			seqs: [][4]int{{0, 1, 0, 300}, {1, 1, 300, 1}, {2, 1, 301, 130}, {3, 1, 431, 64}, {4, 1, 495, 257}}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { attentionCase(t, b, c, engine.BF16, uint64(300+i)) })
	}
}

// attnCovered marks the rows [start, start+len) of each sequence, start and
// len being entries si and si+1 of its seqs row.
func attnCovered(seqs [][4]int, n, si int) []bool {
	cov := make([]bool, n)
	for _, s := range seqs {
		for i := s[si]; i < s[si]+s[si+1]; i++ {
			cov[i] = true
		}
	}
	return cov
}

// filled returns n copies of v.
func filled(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// pick returns the elements of the rows (of width w) that keep marks.
func pick[T any](x []T, keep []bool, w int) []T {
	var out []T
	for r, k := range keep {
		if k {
			out = append(out, x[r*w:(r+1)*w]...)
		}
	}
	return out
}

func attentionCase(t *testing.T, b engine.Backend, c attnCase, dt engine.DType, seed uint64) {
	r := Rand(seed)
	h, g, dh := c.h, c.g, c.dh
	nq, nk := c.nq, c.nk
	flat := make([]int32, 0, 4*len(c.seqs))
	for _, s := range c.seqs {
		nq, nk = max(nq, s[0]+s[1]), max(nk, s[2]+s[3])
		flat = append(flat, int32(s[0]), int32(s[1]), int32(s[2]), int32(s[3]))
	}
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dh))
	}
	qv := Values(r, dt, nq*h*dh, 1)
	kv := Values(r, dt, nk*g*dh, 1)
	vv := Values(r, dt, nk*g*dh, 1)
	q := engine.FromF32(b, dt, qv, nq, h, dh)
	k := engine.FromF32(b, dt, kv, nk, g, dh)
	v := engine.FromF32(b, dt, vv, nk, g, dh)
	seqs := engine.FromI32(b, flat, len(c.seqs), 4)
	q64, k64, v64 := F64(qv), F64(kv), F64(vv)
	wantOut, wantLSE := ref.Attention(q64, k64, v64, c.seqs, nq, nk, h, g, dh, scale, c.nonCausal)
	p := engine.AttentionParams{Scale: float32(scale), NonCausal: c.nonCausal}
	qCov := attnCovered(c.seqs, nq, 0)
	kCov := attnCovered(c.seqs, nk, 2)

	// Run the forward twice over different previous contents of out and
	// lse: covered rows must agree bit for bit, uncovered rows keep them.
	const fillA, fillB = 3.25, -1.5
	forward := func(fill float32) (outT, lseT *engine.Tensor, out, lse []float32) {
		outT = engine.FromF32(b, dt, filled(nq*h*dh, fill), nq, h, dh)
		lseT = engine.FromF32(b, engine.F32, filled(nq*h, fill), nq, h)
		b.Attention(outT, lseT, q, k, v, seqs, p)
		return outT, lseT, engine.ToF32(b, outT), engine.ToF32(b, lseT)
	}
	outT, lseT, out, lse := forward(fillA)
	_, _, outB, lseB := forward(fillB)
	for row, cov := range qCov {
		for i := row * h * dh; i < (row+1)*h*dh; i++ {
			if cov && out[i] != outB[i] || !cov && (out[i] != fillA || outB[i] != fillB) {
				t.Fatalf("out[%d] (row %d, covered %v) = %v, then %v over other contents", i, row, cov, out[i], outB[i])
			}
		}
		for i := row * h; i < (row+1)*h; i++ {
			if cov && lse[i] != lseB[i] || !cov && (lse[i] != fillA || lseB[i] != fillB) {
				t.Fatalf("lse[%d] (row %d, covered %v) = %v, then %v over other contents", i, row, cov, lse[i], lseB[i])
			}
		}
	}
	Close(t, "out", pick(out, qCov, h*dh), pick(wantOut, qCov, h*dh), Tol(dt))
	Close(t, "lse", pick(lse, qCov, h), pick(wantLSE, qCov, h), TolF32)
	if !c.grad {
		return
	}

	// Backward, also twice: dq, dk and dv are overwritten, so the previous
	// contents must not matter, and uncovered rows are zero.
	gv := Values(r, dt, nq*h*dh, 1)
	gOut := engine.FromF32(b, dt, gv, nq, h, dh)
	backward := func(fill float32) (dq, dk, dv []float32) {
		dqT := engine.FromF32(b, dt, filled(nq*h*dh, fill), nq, h, dh)
		dkT := engine.FromF32(b, dt, filled(nk*g*dh, fill), nk, g, dh)
		dvT := engine.FromF32(b, dt, filled(nk*g*dh, fill), nk, g, dh)
		b.AttentionBackward(dqT, dkT, dvT, gOut, outT, lseT, q, k, v, seqs, p)
		return engine.ToF32(b, dqT), engine.ToF32(b, dkT), engine.ToF32(b, dvT)
	}
	dq, dk, dv := backward(fillA)
	dqB, dkB, dvB := backward(fillB)
	for _, x := range []struct {
		name     string
		got, alt []float32
		cov      []bool
		w        int
	}{
		{"dq", dq, dqB, qCov, h * dh},
		{"dk", dk, dkB, kCov, g * dh},
		{"dv", dv, dvB, kCov, g * dh},
	} {
		for i := range x.got {
			if x.got[i] != x.alt[i] || !x.cov[i/x.w] && x.got[i] != 0 {
				t.Fatalf("%s[%d] (row %d, covered %v) = %v, then %v over other contents", x.name, i, i/x.w, x.cov[i/x.w], x.got[i], x.alt[i])
			}
		}
	}
	g64 := F64(gv)
	loss := func() float64 {
		o, _ := ref.Attention(q64, k64, v64, c.seqs, nq, nk, h, g, dh, scale, c.nonCausal)
		return Dot(g64, o)
	}
	GradCheck(t, "dq", r, q64, dq, loss, 48, GradTol(dt))
	GradCheck(t, "dk", r, k64, dk, loss, 48, GradTol(dt))
	GradCheck(t, "dv", r, v64, dv, loss, 48, GradTol(dt))
}
