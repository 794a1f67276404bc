package engine

import "fmt"

// Shape checks shared by every backend: each validates an op's arguments
// against its contract (on Backend) and returns the extents, panicking with
// the op's name and the shapes involved when they disagree. A wrong shape is
// a programmer's mistake, never a user's. Checks that need to read tensor
// contents (token ids in range, rows of seqs) are the backends' own, since
// only a backend can read its memory cheaply.

// GemmDims are the extents and strides of one strided-batched GEMM, in
// elements, row-major.
type GemmDims struct {
	Batch            int // product of C's leading dimensions
	M, N, K          int
	LDA, LDB         int // row lengths of A and B as stored
	StrideA, StrideB int // elements between batch entries (0: broadcast)
}

// GemmShape checks the shapes of C = op(A)·op(B) and returns their extents.
func GemmShape(c, a, b *Tensor, p GemmParams) GemmDims {
	bad := func(why string) {
		panic(fmt.Sprintf("engine: Gemm (transA=%v, transB=%v): %s: C %v, A %v, B %v",
			p.TransA, p.TransB, why, c.Shape(), a.Shape(), b.Shape()))
	}
	if c.Rank() < 2 || a.Rank() < 2 || b.Rank() < 2 {
		bad("operands must have rank ≥ 2")
	}
	cs, as, bs := c.Shape(), a.Shape(), b.Shape()
	m, n := cs[len(cs)-2], cs[len(cs)-1]
	ar, ac := as[len(as)-2], as[len(as)-1]
	br, bc := bs[len(bs)-2], bs[len(bs)-1]
	am, ak := ar, ac
	if p.TransA {
		am, ak = ac, ar
	}
	bk, bn := br, bc
	if p.TransB {
		bk, bn = bc, br
	}
	if am != m || bn != n || ak != bk {
		bad("inner or outer extents disagree")
	}
	g := GemmDims{Batch: cs[:len(cs)-2].Numel(), M: m, N: n, K: ak, LDA: ac, LDB: bc}
	for _, op := range []struct {
		s      Shape
		stride *int
		mat    int
	}{{as, &g.StrideA, ar * ac}, {bs, &g.StrideB, br * bc}} {
		lead := op.s[:len(op.s)-2]
		switch {
		case len(lead) == 0:
			*op.stride = 0
		case lead.Equal(cs[:len(cs)-2]):
			*op.stride = op.mat
		default:
			bad("batch dimensions must equal C's or be absent")
		}
	}
	if a.DType() != b.DType() || !a.DType().IsFloat() {
		panic(fmt.Sprintf("engine: Gemm: A %v and B %v must share a float dtype", a, b))
	}
	if c.DType() != F32 && c.DType() != a.DType() {
		panic(fmt.Sprintf("engine: Gemm: C %v must be f32 or A's dtype %v", c, a.DType()))
	}
	return g
}

// EmbeddingShape checks Embedding (rows = out) and EmbeddingBackward (rows =
// dOut) and returns N, V, D.
func EmbeddingShape(op string, rows, table, ids *Tensor) (n, v, d int) {
	if table.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: table has shape %v, want [V, D]", op, table.Shape()))
	}
	n, v, d = ids.Numel(), table.Dim(0), table.Dim(1)
	MustShape(op, "ids", ids, n)
	MustDType(op, "ids", ids, I32)
	MustShape(op, "rows", rows, n, d)
	return n, v, d
}

// NormShape checks the arguments shared by the RMSNorm ops and returns N, D.
func NormShape(op string, out, rstd, x, w *Tensor) (n, d int) {
	if x.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: x has shape %v, want [N, D]", op, x.Shape()))
	}
	n, d = x.Dim(0), x.Dim(1)
	MustShape(op, "out", out, n, d)
	MustShape(op, "rstd", rstd, n)
	MustShape(op, "w", w, d)
	MustDType(op, "rstd", rstd, F32)
	return n, d
}

// LayerNormShape checks the arguments shared by LayerNorm and
// LayerNormBackward (rows = out or dOut) and returns N, D: x [N, D] float,
// rows [N, D] of x's dtype, w and b [D] of one dtype, x's or f32, mean and
// rstd [N] f32. b may be nil (the backward has none).
func LayerNormShape(op string, rows, mean, rstd, x, w, b *Tensor) (n, d int) {
	if x.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: x has shape %v, want [N, D]", op, x.Shape()))
	}
	n, d = x.Dim(0), x.Dim(1)
	MustDType(op, "x", x, F32, BF16, F16)
	MustShape(op, "out", rows, n, d)
	MustDType(op, "out", rows, x.DType())
	MustShape(op, "mean", mean, n)
	MustShape(op, "rstd", rstd, n)
	MustDType(op, "mean", mean, F32)
	MustDType(op, "rstd", rstd, F32)
	MustShape(op, "w", w, d)
	MustDType(op, "w", w, x.DType(), F32)
	if b != nil {
		MustShape(op, "b", b, d)
		MustDType(op, "b", b, w.DType())
	}
	return n, d
}

// GELUShape checks that out and x of GELU (or dx, dOut and x of its
// backward) agree in element count and dtype, and that k is a GELUKind.
func GELUShape(op string, k GELUKind, out, x *Tensor, more ...*Tensor) {
	if k < GELUErf || k > GELUQuick {
		panic(fmt.Sprintf("engine: %s: unknown GELU kind %v", op, k))
	}
	MustDType(op, "x", x, F32, BF16, F16)
	for _, t := range append([]*Tensor{out}, more...) {
		if t.Numel() != x.Numel() || t.DType() != x.DType() {
			panic(fmt.Sprintf("engine: %s: %v and x %v differ in element count or dtype", op, t, x))
		}
	}
}

// BiasShape checks AddBias (rows = x, bias = b) and AddBiasBackward (rows =
// dOut, bias = db) and returns N, D: rows [N, D] float, bias [D] of rows'
// dtype, or f32 when f32 is allowed.
func BiasShape(op string, rows, bias *Tensor, f32OK bool) (n, d int) {
	if rows.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: rows have shape %v, want [N, D]", op, rows.Shape()))
	}
	n, d = rows.Dim(0), rows.Dim(1)
	MustDType(op, "rows", rows, F32, BF16, F16)
	MustShape(op, "bias", bias, d)
	if f32OK {
		MustDType(op, "bias", bias, rows.DType(), F32)
	} else {
		MustDType(op, "bias", bias, rows.DType())
	}
	return n, d
}

// RoPEShape checks RoPE and RoPEBackward and returns N, H, Dh.
func RoPEShape(op string, x, pos, invFreq *Tensor) (n, h, dh int) {
	if x.Rank() != 3 || x.Dim(2)%2 != 0 {
		panic(fmt.Sprintf("engine: %s: x has shape %v, want [N, H, Dh] with even Dh", op, x.Shape()))
	}
	n, h, dh = x.Dim(0), x.Dim(1), x.Dim(2)
	MustShape(op, "pos", pos, n)
	MustDType(op, "pos", pos, I32)
	MustShape(op, "invFreq", invFreq, dh/2)
	MustDType(op, "invFreq", invFreq, F32)
	return n, h, dh
}

// AttentionDims are the extents of an attention call.
type AttentionDims struct {
	NQ, NK int // query and key rows
	H, G   int // query heads, key/value heads (H a multiple of G)
	Dh     int // head width
	Seqs   int // rows of seqs
}

// AttentionShape checks the shapes and dtypes of q, k, v, lse and seqs.
func AttentionShape(op string, lse, q, k, v, seqs *Tensor) AttentionDims {
	if q.Rank() != 3 {
		panic(fmt.Sprintf("engine: %s: q has shape %v, want [Nq, H, Dh]", op, q.Shape()))
	}
	if k.Rank() != 3 {
		panic(fmt.Sprintf("engine: %s: k has shape %v, want [Nk, G, Dh]", op, k.Shape()))
	}
	d := AttentionDims{NQ: q.Dim(0), H: q.Dim(1), Dh: q.Dim(2), NK: k.Dim(0), G: k.Dim(1)}
	MustShape(op, "k", k, d.NK, d.G, d.Dh)
	MustShape(op, "v", v, d.NK, d.G, d.Dh)
	MustShape(op, "lse", lse, d.NQ, d.H)
	if d.G == 0 || d.H%d.G != 0 {
		panic(fmt.Sprintf("engine: %s: q %v has %d heads, not a multiple of the %d key/value heads of k %v",
			op, q.Shape(), d.H, d.G, k.Shape()))
	}
	MustDType(op, "q", q, F32, BF16)
	MustDType(op, "k", k, q.DType())
	MustDType(op, "v", v, q.DType())
	MustDType(op, "lse", lse, F32)
	MustDType(op, "seqs", seqs, I32)
	if seqs.Rank() != 2 || seqs.Dim(1) != 4 {
		panic(fmt.Sprintf("engine: %s: seqs has shape %v, want [B, 4]", op, seqs.Shape()))
	}
	d.Seqs = seqs.Dim(0)
	return d
}

// SwiGLUShape checks that out, gate and up agree in shape and dtype.
func SwiGLUShape(op string, out, gate, up *Tensor) {
	MustSameShape(op+" gate", out, gate)
	MustSameShape(op+" up", out, up)
	if out.DType() != gate.DType() || out.DType() != up.DType() {
		panic(fmt.Sprintf("engine: %s: dtypes differ: %v, gate %v, up %v", op, out, gate, up))
	}
}

// LogSoftmaxShape checks the LogSoftmaxGather ops and returns N, V.
func LogSoftmaxShape(op string, logp, lse, logits, targets *Tensor) (n, v int) {
	if logits.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: logits has shape %v, want [N, V]", op, logits.Shape()))
	}
	n, v = logits.Dim(0), logits.Dim(1)
	MustShape(op, "logp", logp, n)
	MustShape(op, "lse", lse, n)
	MustShape(op, "targets", targets, n)
	MustDType(op, "logp", logp, F32)
	MustDType(op, "lse", lse, F32)
	MustDType(op, "targets", targets, I32)
	return n, v
}

// AdamWShape checks the tensors of an AdamW update and returns the element
// count.
func AdamWShape(param, grad, m, v, master *Tensor, p AdamWParams) int {
	n := param.Numel()
	if grad.Numel() != n || m.Numel() != n || v.Numel() != n {
		panic(fmt.Sprintf("engine: AdamW: element counts differ: param %v, grad %v, m %v, v %v", param, grad, m, v))
	}
	MustDType("AdamW", "m", m, F32)
	MustDType("AdamW", "v", v, F32)
	if p.Step < 1 {
		panic(fmt.Sprintf("engine: AdamW: step %d, want ≥ 1", p.Step))
	}
	if param.DType() != F32 && master == nil {
		panic(fmt.Sprintf("engine: AdamW: %v parameter needs an f32 master copy", param.DType()))
	}
	if master != nil {
		MustDType("AdamW", "master", master, F32)
		if master.Numel() != n {
			panic(fmt.Sprintf("engine: AdamW: master %v for param %v", master, param))
		}
	}
	return n
}

// SampleShape checks Sample and returns B, V.
func SampleShape(ids, logits, u *Tensor) (b, v int) {
	if logits.Rank() != 2 {
		panic(fmt.Sprintf("engine: Sample: logits has shape %v, want [B, V]", logits.Shape()))
	}
	b, v = logits.Dim(0), logits.Dim(1)
	MustShape("Sample", "ids", ids, b)
	MustShape("Sample", "u", u, b)
	MustDType("Sample", "ids", ids, I32)
	MustDType("Sample", "u", u, F32)
	return b, v
}

// ScatterRowsShape checks ScatterRows and returns the source rows n and the
// bytes of one row.
func ScatterRowsShape(dst, src, rows *Tensor) (n, rowBytes int) {
	if dst.Rank() < 1 || src.Rank() != dst.Rank() || !src.Shape()[1:].Equal(dst.Shape()[1:]) || src.DType() != dst.DType() {
		panic(fmt.Sprintf("engine: ScatterRows: src %v must have dst %v's dtype and row shape", src, dst))
	}
	n = src.Dim(0)
	MustDType("ScatterRows", "rows", rows, I32)
	MustShape("ScatterRows", "rows", rows, n)
	return n, dst.Shape()[1:].Numel() * dst.DType().Size()
}
