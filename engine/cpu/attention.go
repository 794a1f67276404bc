package cpu

// Attention and AttentionBackward implement the contracts of
// engine.Backend.Attention and engine.Backend.AttentionBackward:
// scaled-dot-product attention with grouped-query heads (query head h reads
// key/value head h/(H/G)) over packed variable-length sequences. Row b of
// seqs is (qStart, qLen, kStart, kLen) with qLen ≤ kLen; causal, query t of
// the sequence sees its keys 0 … t+kLen−qLen, non-causal all kLen of them.
// Both are one rule: query t sees keys 0 … t+off, off = kLen−qLen when
// causal and kLen when not (see attnOff), key blocks ending at kLen.
//
//	out [Nq, H, Dh], lse [Nq, H] f32, q [Nq, H, Dh], k, v [Nk, G, Dh],
//	seqs [B, 4] i32; q, k, v, out (and dq, dk, dv, dOut) share one dtype,
//	f32 or bf16.
//
// Both passes are flash-style: the score matrix is never materialised
// beyond one block of attnBQ queries × attnBK keys, so the scratch a worker
// uses is O(block·Dh + block²) in the forward and O(kLen·Dh + block·Dh +
// block²) in the backward, never O(T²). Values are widened to f32 per
// block, all arithmetic is f32, and bf16 results are rounded once, when
// stored. Rows of out and lse that no sequence covers are left alone; such
// rows of dq, dk and dv are zeroed.
//
// Forward, per work item (sequence, query head, query block; for a sequence
// of one query, a decoding step, (sequence, chunk of keys) over all heads,
// the chunks merged in order, see chunk and merge): the block's
// queries, pre-multiplied by scale, meet the visible key blocks in order,
// keeping for each query row the running maximum m, the running sum l of
// exp(s − m) and the unnormalised output o (online softmax):
//
//	s_j = (scale·q)·k_j;  m' = max(m, max_j s_j);  c = exp(m − m')
//	l ← c·l + Σ_j exp(s_j − m');  o ← c·o + Σ_j exp(s_j − m')·v_j
//
// and finally out = o/l, lse = m + log l.
//
// Backward (the FlashAttention-2 recipe), per work item (sequence, key/value
// head g): with D_i = Σ_d dO_i·O_i and the scaled scores S = scale·Q·Kᵀ,
//
//	P = exp(S − lse), dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D),
//	dQ = scale·dS·K, dK += scale·dSᵀ·Q.
//
// The item walks the H/G query heads of g and their query blocks; each query
// block's dQ is finished (over all key blocks) in scratch and stored once,
// and dK, dV of the whole sequence are summed in f32 scratch over all the
// group's heads and stored once at the end.
//
// Every output element is written by exactly one work item and computed in
// a fixed order, so results do not depend on the thread count or on
// scheduling. For this to hold, the query ranges of the sequences must not
// overlap (both passes) and, in the backward, neither may their key ranges;
// both are checked. Work items are handed out dynamically, costlier ones
// first (within a sequence, in the forward), because causal blocks differ
// in cost.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/turnwise/turnwise/engine"
)

// Block sizes. Measured single-threaded at Dh 48 and 128, every choice of
// 32, 64 or 128 in either dimension runs within 5% of the others: the time
// is in the multiply-add loops, not in the per-block work (widening K and V,
// the softmax bookkeeping). 64×64 keeps a worker's forward blocks (Q, O, K,
// V: 4·32 KiB at Dh 128, plus the 16 KiB score block) within L2 while still
// cutting short sequences into several work items.
//
// A decoding step (one query per sequence) is split instead into chunks of
// attnChunk keys, all heads at once: at batch 1, a 1024-key cache gives 8
// work items, and the split depends on the cache's length alone.
const (
	attnBQ    = 64  // queries per block
	attnBK    = 64  // keys per block
	attnChunk = 128 // keys per work item of a decoding step
)

// attnSeq is one validated row of seqs.
type attnSeq struct{ qs, ql, ks, kl int }

// attnDims are the extents shared by the forward and the backward.
type attnDims struct {
	nq, nk int // query and key rows
	h, g   int // query heads, key/value heads
	rep    int // h/g: query heads per key/value head
	dh     int // head width
}

// attnCheck validates the shapes and dtypes of q, k, v, lse and seqs and the
// rows of seqs, and returns the extents and the sequences.
func attnCheck(op string, lse, q, k, v, seqs *engine.Tensor) (attnDims, []attnSeq) {
	e := engine.AttentionShape(op, lse, q, k, v, seqs)
	d := attnDims{nq: e.NQ, nk: e.NK, h: e.H, g: e.G, rep: e.H / e.G, dh: e.Dh}
	raw := i32s(seqs)
	ss := make([]attnSeq, seqs.Dim(0))
	for i := range ss {
		r := raw[4*i : 4*i+4]
		s := attnSeq{qs: int(r[0]), ql: int(r[1]), ks: int(r[2]), kl: int(r[3])}
		bad := ""
		switch {
		case s.qs < 0 || s.ql < 0 || s.ks < 0 || s.kl < 0:
			bad = "negative entry"
		case s.ql > s.kl:
			bad = "qLen > kLen"
		case s.qs+s.ql > d.nq:
			bad = fmt.Sprintf("query rows end past the %d rows of q", d.nq)
		case s.ks+s.kl > d.nk:
			bad = fmt.Sprintf("key rows end past the %d rows of k", d.nk)
		}
		if bad != "" {
			panic(fmt.Sprintf("engine: %s: seqs row %d = (qStart %d, qLen %d, kStart %d, kLen %d): %s",
				op, i, s.qs, s.ql, s.ks, s.kl, bad))
		}
		ss[i] = s
	}
	return d, ss
}

// attnGaps checks that the ranges [start(s), start(s)+n(s)) of the sequences
// do not overlap, naming what in the panic, and calls gap for each maximal
// range of [0, total) that no sequence covers.
func attnGaps(op, what string, ss []attnSeq, total int, start, n func(attnSeq) int, gap func(lo, hi int)) {
	order := make([]int, 0, len(ss))
	for i, s := range ss {
		if n(s) > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return start(ss[a]) - start(ss[b]) })
	end := 0
	prev := -1
	for _, i := range order {
		s := ss[i]
		if start(s) < end {
			panic(fmt.Sprintf("engine: %s: %s rows [%d, %d) of seqs row %d overlap rows [%d, %d) of seqs row %d",
				op, what, start(s), start(s)+n(s), i, start(ss[prev]), end, prev))
		}
		if gap != nil && start(s) > end {
			gap(end, start(s))
		}
		end, prev = start(s)+n(s), i
	}
	if gap != nil && end < total {
		gap(end, total)
	}
}

func seqQStart(s attnSeq) int { return s.qs }
func seqQLen(s attnSeq) int   { return s.ql }
func seqKStart(s attnSeq) int { return s.ks }
func seqKLen(s attnSeq) int   { return s.kl }

// attnItems hands out work items 0 … n−1 to min(threads, n) workers, each
// taking the next unclaimed item, and calls fn(worker, item) for each.
func (b *Backend) attnItems(n int, fn func(worker, item int)) {
	var next atomic.Int64
	b.parallel(min(b.threads, n), 1, func(w, _, _ int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			fn(w, i)
		}
	})
}

// Attention implements engine.Backend.Attention.
func (b *Backend) Attention(out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	const op = "Attention"
	d, ss := attnCheck(op, lse, q, k, v, seqs)
	engine.MustShape(op, "out", out, d.nq, d.h, d.dh)
	engine.MustDType(op, "out", out, q.DType())
	attnGaps(op, "query", ss, d.nq, seqQStart, seqQLen, nil)

	// Items of sequence s are first[s] … first[s+1]−1: for one query (a
	// decoding step) its chunks of attnChunk keys, each over all heads;
	// otherwise its query blocks from the last (the most keys) to the
	// first, each over all query heads. A decoding sequence of several
	// chunks leaves each chunk's partial result in part (from partAt[s])
	// for merge.
	first, partAt := make([]int, len(ss)+1), make([]int, len(ss)+1)
	for i, s := range ss {
		n, parts := (s.ql+attnBQ-1)/attnBQ*d.h, 0
		if s.ql == 1 {
			n = (s.kl + attnChunk - 1) / attnChunk
			if n > 1 {
				parts = n * d.h * (d.dh + 2)
			}
		}
		first[i+1], partAt[i+1] = first[i]+n, partAt[i]+parts
	}
	a := attnFwd{
		attnDims: d, scale: p.Scale, nonCausal: p.NonCausal,
		q: floatsOf(q), k: floatsOf(k), v: floatsOf(v), out: floatsOf(out), lse: f32s(lse),
	}
	part := make([]float32, partAt[len(ss)])
	b.attnItems(first[len(ss)], func(w, item int) {
		si := sort.SearchInts(first, item+1) - 1
		s := ss[si]
		j := item - first[si]
		if s.ql == 1 {
			var pc []float32 // this chunk's partial result (nil: the only chunk)
			if partAt[si+1] > partAt[si] {
				n := d.h * (d.dh + 2)
				pc = part[partAt[si]+j*n : partAt[si]+(j+1)*n]
			}
			a.chunk(b.scratchOf(w, a.chunkScratchLen()), s, j*attnChunk, min((j+1)*attnChunk, s.kl), pc)
			return
		}
		blk := (s.ql+attnBQ-1)/attnBQ - 1 - j/d.h
		t0 := blk * attnBQ
		a.block(b.scratchOf(w, a.scratchLen()), s, j%d.h, t0, min(t0+attnBQ, s.ql))
	})
	for i, s := range ss {
		if partAt[i+1] > partAt[i] {
			a.merge(s, part[partAt[i]:partAt[i+1]])
		}
	}
}

// attnFwd holds the forward's operands.
type attnFwd struct {
	attnDims
	scale        float32
	nonCausal    bool
	q, k, v, out floats
	lse          []float32 // [Nq, H] f32
}

func (a *attnFwd) scratchLen() int { return 2*attnBQ*a.dh + 3*attnBK*a.dh + attnBQ*attnBK + 2*attnBQ }

func (a *attnFwd) chunkScratchLen() int {
	return 2*a.h*a.dh + a.h*attnBK + 2*a.h
}

// chunk computes the one query of sequence s (a decoding step) against its
// keys j0 … j1−1, for every head. Each block of key and value rows is read
// where the cache holds it (bf16 widened in registers), once and in order:
// every head's scores of a key row before the next row (decodeScores), the
// online softmax head by head, then every head's output terms of a value
// row before the next (decodePV). Rows read in order are what the
// hardware's prefetcher follows: head by head, each head taking its
// strided pieces of the block, ran at 0.6 to 0.8 of this even with the
// block asked into the cache ahead, and bf16 widened into scratch at half
// its speed. With part nil (the sequence's only chunk) it stores out and
// lse; otherwise it leaves its partial result in part for merge:
//
//	part [H, Dh] the unnormalised output, then [H] the running maximum m,
//	then [H] the running sum l.
func (a *attnFwd) chunk(sc []float32, s attnSeq, j0, j1 int, part []float32) {
	dh, h, ld := a.dh, a.h, a.g*a.dh
	qb := take(&sc, h*dh)              // [H, Dh] f32: scale·q of each head
	ob := take(&sc, h*dh)              // [H, Dh] f32: unnormalised outputs
	sb := take(&sc, h*attnBK)          // [H, BK] f32: scores, then probabilities
	m, l := take(&sc, h), take(&sc, h) // [H] f32: running max and sum

	loadRows(qb, a.q, s.qs*h*dh, 1, h*dh)
	for c := range qb {
		qb[c] *= a.scale
	}
	for i := range h {
		m[i] = float32(math.Inf(-1))
		l[i] = 0
	}
	clear(ob)

	for k0 := j0; k0 < j1; k0 += attnBK {
		bk := min(attnBK, j1-k0)
		r0, r1 := (s.ks+k0)*ld, (s.ks+k0+bk)*ld
		var kf, vf []float32 // f32 rows
		var kh, vh []uint16  // bf16 rows, widened in registers
		if a.k.dt == engine.F32 {
			kf, vf = a.k.f[r0:r1], a.v.f[r0:r1]
		} else {
			kh, vh = a.k.h[r0:r1], a.v.h[r0:r1]
		}
		decodeScores(sb, attnBK, qb, kf, kh, bk, a.rep, dh, ld)
		for i := range h {
			onlineSoftmax(sb[i*attnBK:(i+1)*attnBK], bk, &m[i], &l[i], ob[i*dh:(i+1)*dh])
		}
		decodePV(ob, sb, attnBK, vf, vh, bk, a.rep, dh, ld)
	}

	if part != nil {
		copy(part, ob)
		copy(part[h*dh:], m)
		copy(part[h*dh+h:], l)
		return
	}
	for i := range h {
		a.finish(s.qs*h+i, ob[i*dh:(i+1)*dh], m[i], l[i])
	}
}

// merge combines the partial results of chunk over s's keys, chunk after
// chunk (a fixed order: the bits do not depend on which worker ran which),
// into out and lse: for each head, with M the largest of the chunks' m,
//
//	l = Σ_c l_c·exp(m_c − M),  o = Σ_c o_c·exp(m_c − M),  out = o/l,  lse = M + log l.
func (a *attnFwd) merge(s attnSeq, part []float32) {
	dh, h := a.dh, a.h
	n := h * (dh + 2)
	o := make([]float32, dh)
	for i := range h {
		mx := float32(math.Inf(-1))
		for c := 0; c < len(part); c += n {
			mx = max(mx, part[c+h*dh+i])
		}
		clear(o)
		var l float32
		for c := 0; c < len(part); c += n {
			w := expf(part[c+h*dh+i] - mx)
			l += w * part[c+h*dh+h+i]
			for x, v := range part[c+i*dh : c+(i+1)*dh] {
				o[x] += w * v
			}
		}
		a.finish(s.qs*h+i, o, mx, l)
	}
}

// finish stores row (a query's head: (token)·H + head) of out and lse from
// its unnormalised output o, running maximum m and sum l: out = o/l, lse =
// m + log l. It scales o in place.
func (a *attnFwd) finish(row int, o []float32, m, l float32) {
	inv := 1 / l
	for x := range o {
		o[x] *= inv
	}
	a.out.store(row*a.dh, o)
	a.lse[row] = m + float32(math.Log(float64(l)))
}

// block computes out and lse of query head h for queries t0 … t1−1 of
// sequence s.
func (a *attnFwd) block(sc []float32, s attnSeq, h, t0, t1 int) {
	dh, bq := a.dh, t1-t0
	qb := take(&sc, attnBQ*dh)                   // [BQ, Dh] f32: scale·q
	ob := take(&sc, attnBQ*dh)                   // [BQ, Dh] f32: unnormalised output
	kb := take(&sc, attnBK*dh)                   // [BK, Dh] f32
	vb := take(&sc, attnBK*dh)                   // [BK, Dh] f32
	ktb := take(&sc, dh*attnBK)                  // [Dh, BK] f32: the key block transposed
	sb := take(&sc, attnBQ*attnBK)               // [BQ, BK] f32: scores, then probabilities
	m, l := take(&sc, attnBQ), take(&sc, attnBQ) // [BQ] f32: running max and sum

	g := h / a.rep
	loadRows(qb[:bq*dh], a.q, ((s.qs+t0)*a.h+h)*dh, bq, a.h*dh)
	for i := range bq {
		row := qb[i*dh : (i+1)*dh]
		for c := range row {
			row[c] *= a.scale
		}
		m[i] = float32(math.Inf(-1))
		l[i] = 0
	}
	clear(ob[:bq*dh])

	off := attnOff(s, a.nonCausal) // query t sees keys 0 … t+off
	kEnd := min(t1+off, s.kl)      // keys any query of the block sees
	for j0 := 0; j0 < kEnd; j0 += attnBK {
		bk := min(attnBK, kEnd-j0)
		r0 := ((s.ks+j0)*a.g + g) * dh
		loadRows(kb[:bk*dh], a.k, r0, bk, a.g*dh)
		loadRows(vb[:bk*dh], a.v, r0, bk, a.g*dh)
		if bq == 1 {
			// One query (a decoding step): its scores straight from the
			// key rows, where transposing the block would cost more than
			// the products.
			if nj := min(bk, t0+off+1-j0); nj > 0 {
				sr := sb[:nj]
				dotRows(sr, qb[:dh], kb[:nj*dh])
				onlineSoftmax(sr, nj, &m[0], &l[0], ob[:dh])
				axpyRows(ob[:dh], sr, vb)
			}
			continue
		}
		transposeBlock(ktb, kb[:bk*dh], bk, dh, attnBK)
		// Query rows go in pairs that share the loads of K and V; query
		// i+1 sees at most one key more than query i.
		for i := 0; i < bq; i += 2 {
			nj := min(bk, t0+i+off+1-j0) // keys of this block query i sees
			q0, o0 := qb[i*dh:(i+1)*dh], ob[i*dh:(i+1)*dh]
			s0 := sb[i*attnBK : (i+1)*attnBK]
			if i+1 == bq || nj <= 0 {
				for r := i; r < min(i+2, bq); r++ {
					if nj := min(bk, t0+r+off+1-j0); nj > 0 {
						sr := sb[r*attnBK : r*attnBK+nj]
						orow := ob[r*dh : (r+1)*dh]
						dotRowsT(sr, qb[r*dh:(r+1)*dh], ktb, attnBK)
						onlineSoftmax(sr, nj, &m[r], &l[r], orow)
						axpyRows(orow, sr, vb)
					}
				}
				continue
			}
			nj1 := min(bk, nj+1)
			q1, o1 := qb[(i+1)*dh:(i+2)*dh], ob[(i+1)*dh:(i+2)*dh]
			s0, s1 := s0[:nj1], sb[(i+1)*attnBK:(i+1)*attnBK+nj1]
			dotRows2T(s0, s1, q0, q1, ktb, attnBK)
			onlineSoftmax(s0, nj, &m[i], &l[i], o0)
			onlineSoftmax(s1, nj1, &m[i+1], &l[i+1], o1)
			axpyRows2(o0, o1, s0, s1, vb)
		}
	}

	for i := range bq {
		a.finish((s.qs+t0+i)*a.h+h, ob[i*dh:(i+1)*dh], m[i], l[i])
	}
}

// attnOff returns off such that query t of s sees keys 0 … min(t+off,
// kLen−1): kLen−qLen for causal attention, kLen (every key) for
// non-causal.
func attnOff(s attnSeq, nonCausal bool) int {
	if nonCausal {
		return s.kl
	}
	return s.kl - s.ql
}

// onlineSoftmax folds the first n scores of s, a query row's scores against
// one key block, into the row's running maximum m, sum l and unnormalised
// output o: o and l are rescaled to the new maximum, and s is replaced by
// the probabilities exp(s − m), zero from n on.
func onlineSoftmax(s []float32, n int, m, l *float32, o []float32) {
	mx := *m
	for _, x := range s[:n] {
		mx = max(mx, x)
	}
	sum := expShift(s[:n], mx)
	clear(s[n:])
	if c := expf(*m - mx); c != 1 {
		*l *= c
		for x := range o {
			o[x] *= c
		}
	}
	*l += sum
	*m = mx
}

// AttentionBackward implements engine.Backend.AttentionBackward.
func (b *Backend) AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	const op = "AttentionBackward"
	d, ss := attnCheck(op, lse, q, k, v, seqs)
	for _, t := range []struct {
		name string
		t    *engine.Tensor
	}{{"out", out}, {"dOut", dOut}, {"dq", dq}} {
		engine.MustShape(op, t.name, t.t, d.nq, d.h, d.dh)
		engine.MustDType(op, t.name, t.t, q.DType())
	}
	engine.MustShape(op, "dk", dk, d.nk, d.g, d.dh)
	engine.MustShape(op, "dv", dv, d.nk, d.g, d.dh)
	engine.MustDType(op, "dk", dk, q.DType())
	engine.MustDType(op, "dv", dv, q.DType())

	a := attnBwd{
		attnDims: d, scale: p.Scale, nonCausal: p.NonCausal,
		q: floatsOf(q), k: floatsOf(k), v: floatsOf(v), out: floatsOf(out), dOut: floatsOf(dOut),
		dq: floatsOf(dq), dk: floatsOf(dk), dv: floatsOf(dv), lse: f32s(lse),
	}
	qRow, kRow := d.h*d.dh, d.g*d.dh // elements per row of q and of k
	attnGaps(op, "query", ss, d.nq, seqQStart, seqQLen, func(lo, hi int) {
		zeroRange(a.dq, lo*qRow, hi*qRow)
	})
	attnGaps(op, "key", ss, d.nk, seqKStart, seqKLen, func(lo, hi int) {
		zeroRange(a.dk, lo*kRow, hi*kRow)
		zeroRange(a.dv, lo*kRow, hi*kRow)
	})

	// Items are (sequence, key/value head), the costliest sequences first.
	order := make([]int, len(ss))
	maxKL := 0
	for i, s := range ss {
		order[i] = i
		maxKL = max(maxKL, s.kl)
	}
	cost := func(s attnSeq) int { return s.ql * (2*s.kl - s.ql + 1) } // 2 × visible pairs (causal)
	if p.NonCausal {
		cost = func(s attnSeq) int { return s.ql * s.kl }
	}
	slices.SortStableFunc(order, func(x, y int) int { return cost(ss[y]) - cost(ss[x]) })
	n := a.scratchLen(maxKL)
	b.attnItems(len(ss)*d.g, func(w, item int) {
		a.item(b.scratchOf(w, n), ss[order[item/d.g]], item%d.g)
	})
}

// attnBwd holds the backward's operands.
type attnBwd struct {
	attnDims
	scale                          float32
	nonCausal                      bool
	q, k, v, out, dOut, dq, dk, dv floats
	lse                            []float32 // [Nq, H] f32
}

func (a *attnBwd) scratchLen(maxKL int) int {
	return 4*maxKL*a.dh + 3*attnBQ*a.dh + 2*attnBK*a.dh + 2*attnBQ*attnBK + 4*attnBQ + a.dh
}

// item computes dk, dv of key/value head g and dq of its query heads for
// sequence s.
func (a *attnBwd) item(sc []float32, s attnSeq, g int) {
	dh, kl := a.dh, s.kl
	kAll := take(&sc, kl*dh)       // [kLen, Dh] f32
	vAll := take(&sc, kl*dh)       // [kLen, Dh] f32
	dkAll := take(&sc, kl*dh)      // [kLen, Dh] f32: Σ over heads of dSᵀ·(scale·Q)
	dvAll := take(&sc, kl*dh)      // [kLen, Dh] f32: Σ over heads of Pᵀ·dO
	qb := take(&sc, attnBQ*dh)     // [BQ, Dh] f32: scale·q
	dob := take(&sc, attnBQ*dh)    // [BQ, Dh] f32: dOut
	dqb := take(&sc, attnBQ*dh)    // [BQ, Dh] f32: dS·K
	ktb := take(&sc, dh*attnBK)    // [Dh, BK] f32: a key block transposed
	vtb := take(&sc, dh*attnBK)    // [Dh, BK] f32: a value block transposed
	pb := take(&sc, attnBQ*attnBK) // [BQ, BK] f32: P
	db := take(&sc, attnBQ*attnBK) // [BQ, BK] f32: dP, then dS
	lseb := take(&sc, attnBQ)      // [BQ] f32
	delta := take(&sc, attnBQ)     // [BQ] f32: D = rowsum(dO∘O)
	col := take(&sc, 2*attnBQ)     // [2, BQ] f32: two columns of P or dS
	orow := take(&sc, dh)          // [Dh] f32: one row of out

	loadRows(kAll[:kl*dh], a.k, (s.ks*a.g+g)*dh, kl, a.g*dh)
	loadRows(vAll[:kl*dh], a.v, (s.ks*a.g+g)*dh, kl, a.g*dh)
	clear(dkAll)
	clear(dvAll)

	off := attnOff(s, a.nonCausal)
	for h := g * a.rep; h < (g+1)*a.rep; h++ {
		for t0 := 0; t0 < s.ql; t0 += attnBQ {
			t1 := min(t0+attnBQ, s.ql)
			bq := t1 - t0
			for i := range bq {
				row := (s.qs+t0+i)*a.h + h
				qr := qb[i*dh : (i+1)*dh]
				loadRow(qr, a.q, row*dh)
				for c := range qr {
					qr[c] *= a.scale
				}
				dor := dob[i*dh : (i+1)*dh]
				loadRow(dor, a.dOut, row*dh)
				loadRow(orow, a.out, row*dh)
				delta[i] = dot(dor, orow)
				lseb[i] = a.lse[row]
			}
			clear(dqb[:bq*dh])

			kEnd := min(t1+off, s.kl)
			for j0 := 0; j0 < kEnd; j0 += attnBK {
				bk := min(attnBK, kEnd-j0)
				kb := kAll[j0*dh : (j0+bk)*dh]
				vb := vAll[j0*dh : (j0+bk)*dh]
				transposeBlock(ktb, kb, bk, dh, attnBK)
				transposeBlock(vtb, vb, bk, dh, attnBK)
				// P and dS of the block; entries of keys a query does not
				// see are zero.
				for i := 0; i < bq; i += 2 {
					nj := max(0, min(bk, t0+i+off+1-j0))
					if i+1 == bq || nj == 0 {
						for r := i; r < min(i+2, bq); r++ {
							nj := max(0, min(bk, t0+r+off+1-j0))
							pr := pb[r*attnBK : r*attnBK+bk]
							dr := db[r*attnBK : r*attnBK+bk]
							if nj > 0 {
								dotRowsT(pr[:nj], qb[r*dh:(r+1)*dh], ktb, attnBK)
								dotRowsT(dr[:nj], dob[r*dh:(r+1)*dh], vtb, attnBK)
								scoreGrads(pr[:nj], dr[:nj], lseb[r], delta[r])
								axpyRows(dqb[r*dh:(r+1)*dh], dr[:nj], kb)
							}
							clear(pr[nj:])
							clear(dr[nj:])
						}
						continue
					}
					nj1 := min(bk, nj+1)
					p0, p1 := pb[i*attnBK:i*attnBK+bk], pb[(i+1)*attnBK:(i+1)*attnBK+bk]
					d0, d1 := db[i*attnBK:i*attnBK+bk], db[(i+1)*attnBK:(i+1)*attnBK+bk]
					dotRows2T(p0[:nj1], p1[:nj1], qb[i*dh:(i+1)*dh], qb[(i+1)*dh:(i+2)*dh], ktb, attnBK)
					dotRows2T(d0[:nj1], d1[:nj1], dob[i*dh:(i+1)*dh], dob[(i+1)*dh:(i+2)*dh], vtb, attnBK)
					scoreGrads(p0[:nj], d0[:nj], lseb[i], delta[i])
					scoreGrads(p1[:nj1], d1[:nj1], lseb[i+1], delta[i+1])
					clear(p0[nj:])
					clear(d0[nj:])
					clear(p1[nj1:])
					clear(d1[nj1:])
					axpyRows2(dqb[i*dh:(i+1)*dh], dqb[(i+1)*dh:(i+2)*dh], d0[:nj1], d1[:nj1], kb)
				}
				// dV_j += Σ_i P_ij·dO_i and dK_j += Σ_i dS_ij·(scale·Q_i),
				// over the queries i0 … bq−1 that see key j0+j, for keys
				// in pairs that share the loads of dO and Q (key j+1 is
				// seen by at most the queries that see key j).
				for j := 0; j < bk; j += 2 {
					i0 := max(0, j0+j-off-t0)
					if i0 >= bq {
						break
					}
					n := bq - i0
					c0, c1 := col[:n], col[attnBQ:attnBQ+n]
					dv0, dk0 := dvAll[(j0+j)*dh:(j0+j+1)*dh], dkAll[(j0+j)*dh:(j0+j+1)*dh]
					dor, qr := dob[i0*dh:bq*dh], qb[i0*dh:bq*dh]
					if j+1 == bk {
						gatherCol(c0, pb[i0*attnBK+j:], attnBK)
						axpyRows(dv0, c0, dor)
						gatherCol(c0, db[i0*attnBK+j:], attnBK)
						axpyRows(dk0, c0, qr)
						continue
					}
					dv1, dk1 := dvAll[(j0+j+1)*dh:(j0+j+2)*dh], dkAll[(j0+j+1)*dh:(j0+j+2)*dh]
					gatherCol(c0, pb[i0*attnBK+j:], attnBK)
					gatherCol(c1, pb[i0*attnBK+j+1:], attnBK)
					axpyRows2(dv0, dv1, c0, c1, dor)
					gatherCol(c0, db[i0*attnBK+j:], attnBK)
					gatherCol(c1, db[i0*attnBK+j+1:], attnBK)
					axpyRows2(dk0, dk1, c0, c1, qr)
				}
			}
			for i := range bq {
				dr := dqb[i*dh : (i+1)*dh]
				for c := range dr {
					dr[c] *= a.scale
				}
				a.dq.store(((s.qs+t0+i)*a.h+h)*dh, dr)
			}
		}
	}
	for j := range kl {
		r := ((s.ks+j)*a.g + g) * dh
		a.dk.store(r, dkAll[j*dh:(j+1)*dh])
		a.dv.store(r, dvAll[j*dh:(j+1)*dh])
	}
}

// scoreGrads turns a query row's scores s (against some keys) into the
// probabilities P = exp(s − lse) and its dO·V products d into
// dS = P∘(d − delta), in place.
func scoreGrads(s, d []float32, lse, delta float32) {
	expShift(s, lse)
	d = d[:len(s)]
	for j, p := range s {
		d[j] = p * (d[j] - delta)
	}
}

// gatherCol sets dst[i] = src[i·stride] for i < len(dst).
func gatherCol(dst, src []float32, stride int) {
	for i := range dst {
		dst[i] = src[i*stride]
	}
}

// take cuts the first n elements off *sc and returns them, with capacity n
// so that no use can stray into the next piece.
func take(sc *[]float32, n int) []float32 {
	s := (*sc)[:n:n]
	*sc = (*sc)[n:]
	return s
}

// loadRow widens len(dst) elements of src starting at off into dst.
func loadRow(dst []float32, src floats, off int) {
	if src.dt == engine.F32 {
		copy(dst, src.f[off:off+len(dst)])
		return
	}
	src.load(off, len(dst), dst)
}

// loadRows widens n rows of len(dst)/n elements, ld apart in src from off,
// into dst [n, len(dst)/n]: for bf16 in one call into C, not one a row.
func loadRows(dst []float32, src floats, off, n, ld int) {
	if src.dt != engine.BF16 {
		dh := len(dst) / max(n, 1)
		for j := range n {
			loadRow(dst[j*dh:(j+1)*dh], src, off+j*ld)
		}
		return
	}
	bf16RowsToF32(src.h[off:], dst, n, ld)
}

// zeroRange sets elements [lo, hi) of a to zero.
func zeroRange(a floats, lo, hi int) {
	if a.dt == engine.F32 {
		clear(a.f[lo:hi])
	} else {
		clear(a.h[lo:hi]) // +0 in bf16 and f16 is all zero bits
	}
}

// dot returns Σ_d x[d]·y[d] over len(x) elements, in f32.
func dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	d := 0
	for ; d+4 <= len(x); d += 4 {
		s0 += x[d] * y[d]
		s1 += x[d+1] * y[d+1]
		s2 += x[d+2] * y[d+2]
		s3 += x[d+3] * y[d+3]
	}
	for ; d < len(x); d++ {
		s0 += x[d] * y[d]
	}
	return (s0 + s1) + (s2 + s3)
}
