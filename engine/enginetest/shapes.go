package enginetest

// Model-shape conformance. The op tables of this package use small, awkward
// shapes and compare with the float64 reference. RunShapes instead runs the
// ops at the shapes one model gives them — the projections and the MLP at
// each of its sequence lengths, the attention of those lengths (non-causal
// too, and decoding and a prefill over a cache), the norms, RoPE, the bias
// and the GELUs, one loss chunk of its whole vocabulary, the embedding table
// and the optimizer's table of every LoRA adapter — and compares each result
// with a reference computed from the same inputs. What this catches is what
// only large extents reach: grid and index arithmetic past 2¹⁶ blocks or 2²⁴
// elements, tiles that a small case never fills or repeats, long reductions
// (K = 14336, 128256 logits, 8192 keys), RoPE angles in the thousands of
// radians, workspaces sized for the real model.
//
// Two modes (ShapesConfig), each with two kinds of check.
//
// Second-backend mode (ShapesConfig.Ref set; the Mini shapes, Ref being the
// CPU backend, itself checked against the float64 reference): every op runs
// on the backend under test and on Ref, in the same dtype, from the same
// inputs, and every result is compared in full.
//
// Self-reference mode (Ref nil; Llama-3.1-8B's shapes on a GPU, where the
// CPU backend cannot keep up): the backend is its own reference. In a bf16
// case every op runs twice on it, in bf16 and again in f32 on the same
// inputs upcast from their bf16 values (a device cast, exact), and each bf16
// result is compared in full with the f32 one. For the GEMM and attention
// the two runs are different kernels (tensor cores against SIMT); for the
// other ops they are one template instantiated twice, so a fault common to
// both dtypes is left to the spot checks below, which sample the last rows,
// where the index faults of large extents show. In an f32 case the
// reference would repeat the very computation under test, so none runs:
// but for the GEMMs (below) and RoPE's round trip the f32 case rests on the
// spot checks, its kernels being compared in full as the reference of the
// bf16 case.
//
// GEMM peer (either mode, ShapesConfig.GEMMPeer): every GEMM also runs on a
// second, independent GEMM implementation in the case's own dtype — our
// kernel against cuBLASLt and cuBLASLt against ours on a GPU (both bf16
// operands with f32 accumulation, or both f32), the CPU backend's OpenBLAS
// under the emulator — and is compared in full.
//
// Float64 spot checks (every mode): on a few sampled rows of each result
// (sampleRows: the first, the middle, the last and two drawn ones), the
// host computes the op in float64 from the very inputs the backend was given
// — for a GEMM the rows of C from those rows of op(A) and all of op(B); for
// attention whole query rows (every head, every visible key) and, in the
// backward, the rows of dq and of dk and dv at sampled query and key
// positions; for the norms, RoPE, SwiGLU, the GELUs, the bias, the
// log-softmax and the embedding their rows; for the column reductions (dw
// and db of the norms and the bias) sampled columns summed over every row;
// for AdamW the first, a middle and the last adapter of the table. Where a
// backward reads forward results (attention's out and lse, the norms'
// statistics) the spot check uses the backend's own, downloaded, as the op
// did.
//
// Tolerances. Each result is bounded by its op's own tolerance against the
// exact value of the op on its inputs — Tol for a forward, GradTol for a
// backward, relative to the tensor's largest magnitude as Close measures,
// and checked against float64 by the package's own tests: in f32, f32
// accumulation; in bf16, the rounding of the result and of the
// intermediates that the contract or the kernel rounds (at most two
// roundings at 2⁻⁸ each, or three in QuickGELU, whose inner rounding moves
// a value by 2⁻⁸·|1.702x|·σ'(·) ≤ 0.26·2⁻⁸ of the largest output at
// |x| ≤ 5). Two results are then within the sum of their bounds: 2·Tol(dt)
// for two backends in dt (the second-backend mode, and a GEMM against its
// peer: ours and cuBLASLt both round one f32-accumulated sum, or both
// accumulate in f32); Tol(bf16) + Tol(f32) for a bf16 result against the
// f32 one (the self-reference mode: the f32 run sees the same input values
// and rounds nothing in between); Tol(dt) against the float64 spot checks.
// The f32 results of a bf16 case — attention's and the log-softmax's lse,
// LayerNorm's statistics, an f32 GEMM output, the bias and embedding
// gradients, AdamW's moments and masters — are computed in f32 from the
// same values on both sides (a product of two bf16 values is exact in f32)
// and keep the f32 bounds. Where an op hands back a value it rounded
// (AddRMSNorm's residual), the reference continues from the backend's
// rounded value rather than its own, so that what follows is compared from
// the same inputs.
//
// Cost at Llama-3.1-8B's shapes. The budget is 90 s for every op at both
// sequence lengths, in both dtypes, "own" and "cublas", on an H100 or H200
// whose host has 16 cores, one process per op (the GPU bundle's way: a
// device fault poisons its process). The device work is small: the GEMMs
// are 5.6 TFLOP per run, ≈ 0.6 s at the ≈ 10 TFLOP/s assumed of our f32
// SIMT kernel (the bf16 run's reference, and the f32 run itself),
// milliseconds on tensor cores and in cuBLASLt; attention is ≈ 2.3 TFLOP
// with its backward, ≈ 0.5 s in f32 SIMT at 5 TFLOP/s; the rest is
// memory-bound: gigabytes at terabytes a second. The host does the rest, in
// parallel chunks on every core. Inputs are drawn by a counter-based
// generator and encoded in the same pass (≈ 5 ns an element on one core,
// 0.3 ns on 16) and uploaded once per backend, the reference's f32 copy
// being a device cast; results are downloaded and compared from their raw
// bytes (≈ 6 ns an element, 0.4 ns on 16), or, with no reference (f32),
// only their sampled rows are downloaded; a float64 multiply-add of the
// spot checks is taken at 1 ns (0.06 ns on 16 cores), and copies between
// host and device at 5 GB/s, pageable memory's worst. Per op (elements
// drawn; bytes up and down in the bf16 run, then the f32 run; float64
// multiply-adds of the spot checks), the estimate in seconds:
//
//	gemm        0.85 G drawn (the 128256×4096 classifier 0.53 G; operands
//	            drawn once at 8192 rows, 2048 being their first rows), up to
//	            the backend and the peer 3.4 + 6.8 GB, down (C from the
//	            backend, the reference and the peer) 5.0 + 4.6 GB; spot rows
//	            7.7 G multiply-adds (one pass over each op(B) for all rows,
//	            0.5 s): 3.4 + 3.8 s, as much again for "cublas"
//	attention   0.35 G (decoding's 16 caches of 8192 keys 0.27 G), up 0.7 +
//	            1.4 GB, down 0.9 + 0.2 GB, spot 3.2 G: 1.2 + 1.1 s
//	embedding   0.56 G, up 1.1 + 2.2 GB, down 6.6 GB (the f32 table
//	            gradient, 0.53 G elements, at each length, from both runs):
//	            2.1 + 0.6 s
//	gelu        0.23 G, down 5.3 GB (three GELUs and their gradients): 1.6 +
//	            0.3 s
//	swiglu      0.35 G, down 2.6 GB: 0.9 + 0.4 s
//	bias, rmsnorm, adamw_lora, rope, layernorm, logsoftmax: 0.1 to 0.4 s
//	            each run
//
// which is ≈ 18 s for "own" and ≈ 7 s for "cublas" (its GEMMs alone: every
// other op of that backend runs the kernels "own" checks), plus one to two
// seconds per process to start and open the device: ≈ 45 s, within 90 s
// at half the rates assumed. A float64 spot check reads a whole 8B-size
// tensor only where its rows depend on all of it — op(B) of a GEMM, once
// for all sampled rows; the queries, dOut and out behind a key row of dk
// and dv — and column reductions are checked on sampled columns. Each op
// logs its host time by phase, to set these figures against a GPU's.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// ShapesEnv names the environment variable that selects the model whose
// shapes RunShapes is run at by the backends' tests: "mini" (the default,
// small enough for the kernel emulator) or "llama8B".
const ShapesEnv = "TW_CONFORMANCE_SHAPES"

// ModelShapes are the extents of one model that RunShapes builds its cases
// from.
type ModelShapes struct {
	Name                    string
	Dim, FFN, Vocab         int   // hidden width D, MLP width F, vocabulary V
	Heads, KVHeads, HeadDim int   // H, G, Dh; Dim == Heads·HeadDim
	Layers                  int   // decoder layers, whose LoRA adapters the optimizer steps
	LoRARank                int   // r of the LoRA adapters
	SeqLens                 []int // tokens T of one training sequence: every op with a token dimension runs at each
	LogitRows               int   // rows of the vocabulary projection and log-softmax: one loss chunk
	Decode                  int   // sequences decoding one token over a cache of the longest length
	Prefill                 int   // queries of a prefill over a cache of the longest length
}

// Llama8B is Llama-3.1-8B: hidden 4096, FFN 14336, vocabulary 128256, 32
// query and 8 key/value heads of width 128, 32 layers, LoRA rank 16,
// sequences of 2048 and 8192 tokens.
var Llama8B = ModelShapes{
	Name: "llama8B", Dim: 4096, FFN: 14336, Vocab: 128256, Heads: 32, KVHeads: 8, HeadDim: 128,
	Layers: 32, LoRARank: 16, SeqLens: []int{2048, 8192}, LogitRows: 256, Decode: 16, Prefill: 512,
}

// Mini has Llama8B's structure (grouped heads 4:1, FFN ≈ 3.5·D) at sizes the
// kernel emulator runs in seconds; its extents are multiples of no tile.
var Mini = ModelShapes{
	Name: "mini", Dim: 128, FFN: 344, Vocab: 1000, Heads: 8, KVHeads: 2, HeadDim: 16,
	Layers: 2, LoRARank: 4, SeqLens: []int{67, 130}, LogitRows: 13, Decode: 3, Prefill: 20,
}

// ShapesFromEnv returns the shapes $TW_CONFORMANCE_SHAPES names (Mini when
// it is unset or empty).
func ShapesFromEnv() (ModelShapes, error) {
	switch v := os.Getenv(ShapesEnv); v {
	case "", Mini.Name:
		return Mini, nil
	case Llama8B.Name:
		return Llama8B, nil
	default:
		return ModelShapes{}, fmt.Errorf("$%s = %q: want %q or %q", ShapesEnv, v, Mini.Name, Llama8B.Name)
	}
}

// ShapesConfig says what RunShapes compares the backend under test with
// (see the modes above).
type ShapesConfig struct {
	// Ref, when non-nil, is the second backend every op also runs on, in
	// the same dtype (the CPU backend, at the Mini shapes). Nil selects the
	// self-reference mode: bf16 results against the backend's own f32 ones.
	Ref engine.Backend
	// GEMMPeer, when non-nil, is an independent GEMM implementation every
	// GEMM also runs on, in the case's dtype.
	GEMMPeer engine.Backend
	// Ops names the ops to run (gemm, attention, rmsnorm, rope, swiglu,
	// layernorm, bias, gelu, logsoftmax, embedding, adamw_lora); the others
	// are skipped. Nil runs every op.
	Ops []string
}

// RunShapes runs every op at the shapes of s on b, in f32 and bf16, as
// subtests named <shapes>/<dtype>/<op>, and checks them as c says.
func RunShapes(t *testing.T, b engine.Backend, c ShapesConfig, s ModelShapes) {
	if s.Dim != s.Heads*s.HeadDim || s.Heads%s.KVHeads != 0 || len(s.SeqLens) == 0 || s.LogitRows > s.SeqLens[len(s.SeqLens)-1] {
		panic(fmt.Sprintf("enginetest: shapes %s: Dim %d != Heads %d · HeadDim %d, KVHeads %d does not divide Heads, "+
			"or LogitRows %d exceeds the longest of SeqLens %v", s.Name, s.Dim, s.Heads, s.HeadDim, s.KVHeads, s.LogitRows, s.SeqLens))
	}
	if c.Ref == b {
		panic("enginetest: RunShapes: the reference is the backend under test; leave Ref nil for the self-reference mode")
	}
	suites := []struct {
		name string
		run  func(t *testing.T, p pairRun, s ModelShapes)
	}{
		{"gemm", shapeGemms},
		{"attention", shapeAttention},
		{"rmsnorm", shapeRMSNorm},
		{"rope", shapeRoPE},
		{"swiglu", shapeSwiGLU},
		{"layernorm", shapeLayerNorm},
		{"bias", shapeBias},
		{"gelu", shapeGELU},
		{"logsoftmax", shapeLogSoftmax},
		{"embedding", shapeEmbedding},
		{"adamw_lora", shapeAdamWLoRA},
	}
	t.Run(s.Name, func(t *testing.T) {
		for _, dt := range FloatDTypes {
			t.Run(dt.String(), func(t *testing.T) {
				for i, su := range suites {
					t.Run(su.name, func(t *testing.T) {
						if c.Ops != nil && !slices.Contains(c.Ops, su.name) {
							t.Skipf("not among the ops selected: %v", c.Ops)
						}
						p := pairRun{t: t, b: b, ref: c.Ref, dt: dt, r: Rand(uint64(1000 + i)), clock: new(clock)}
						if c.Ref == nil {
							p.ref, p.self = b, true
						}
						if su.name == "gemm" {
							p.peer = c.GEMMPeer
						}
						start := time.Now()
						su.run(t, p, s)
						t.Logf("took %v: %v", time.Since(start).Round(time.Millisecond), p.clock)
					})
				}
			})
		}
	})
}

// pairRun holds the backends of one op of RunShapes, the activation dtype
// of the case, its random source, the test whose end frees the buffers it
// allocates (at 8B shapes they add up to gigabytes per case), and the clock
// of its host work.
type pairRun struct {
	t     *testing.T
	b     engine.Backend // under test
	ref   engine.Backend // the reference: b itself in the self-reference mode
	peer  engine.Backend // the GEMM peer, or nil
	self  bool           // the self-reference mode
	dt    engine.DType
	r     *rand.Rand
	clock *clock
}

// in returns p with buffers freed at the end of t (a subtest).
func (p pairRun) in(t *testing.T) pairRun {
	p.t = t
	return p
}

// runsRef reports whether the reference runs: always with a second
// backend; in the self-reference mode only in bf16 cases (an f32 one would
// repeat the computation under test).
func (p pairRun) runsRef() bool { return !p.self || p.dt != engine.F32 }

// refDT is the dtype of the reference's copy of a tensor of dtype dt: the
// same, or f32 for a float in the self-reference mode.
func (p pairRun) refDT(dt engine.DType) engine.DType {
	if p.self && dt != engine.I32 {
		return engine.F32
	}
	return dt
}

// twin is one tensor on the backend under test, its copy on the reference
// (nil where the reference does not run) and on the GEMM peer (nil but in
// a GEMM with a peer), and, for an input, the values it was made with.
type twin struct {
	b, ref, peer *engine.Tensor
	host         []float32
}

// rows returns the view of rows [lo, hi) of x along dimension 0.
func (x twin) rows(lo, hi int) twin {
	y := twin{b: x.b.Rows(lo, hi)}
	if x.ref != nil {
		y.ref = x.ref.Rows(lo, hi)
	}
	if x.peer != nil {
		y.peer = x.peer.Rows(lo, hi)
	}
	if x.host != nil {
		w := rowLen(x.b)
		y.host = x.host[lo*w : hi*w]
	}
	return y
}

// rowLen returns the elements of one row (along dimension 0) of x.
func rowLen(x *engine.Tensor) int {
	if x.Dim(0) == 0 {
		return 0
	}
	return x.Numel() / x.Dim(0)
}

// side picks one backend's tensor of a twin.
type side func(twin) *engine.Tensor

func onB(x twin) *engine.Tensor    { return x.b }
func onRef(x twin) *engine.Tensor  { return x.ref }
func onPeer(x twin) *engine.Tensor { return x.peer }

// run calls op on the backend under test with its tensors, then on the
// reference (where it runs) and the GEMM peer (where there is one) with
// theirs: the op is written once for all of them.
func (p pairRun) run(op func(be engine.Backend, at side)) {
	defer p.clock.add(phaseOps, time.Now())
	op(p.b, onB)
	if p.runsRef() {
		op(p.ref, onRef)
	}
	if p.peer != nil {
		op(p.peer, onPeer)
	}
}

// onRefOnly calls op on the reference alone, where it runs.
func (p pairRun) onRefOnly(op func(be engine.Backend, at side)) {
	defer p.clock.add(phaseOps, time.Now())
	if p.runsRef() {
		op(p.ref, onRef)
	}
}

// owned frees x's buffers when p's test ends.
func (p pairRun) owned(x twin) twin {
	p.t.Cleanup(func() {
		p.b.FreeBuffer(x.b.Buffer())
		if x.ref != nil && x.ref != x.b {
			p.ref.FreeBuffer(x.ref.Buffer())
		}
		if x.peer != nil {
			p.peer.FreeBuffer(x.peer.Buffer())
		}
	})
	return x
}

// chunk is the number of elements RunShapes's host work hands to one
// goroutine: inputs and comparisons run to 10⁹ elements at 8B shapes.
const chunk = 1 << 20

// parallel calls fn on the pieces [lo, hi) of [0, n), each at most size
// long, on all CPUs.
func parallel(n, size int, fn func(lo, hi int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += size {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(lo, min(n, lo+size))
		}()
	}
	wg.Wait()
}

// uniform returns element i of the random stream seed, in [0, 1): the
// SplitMix64 finaliser of a Weyl sequence, so that any piece of a stream is
// drawn without the rest and the values do not depend on the chunking.
func uniform(seed uint64, i int) float64 {
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// values returns a twin of values uniform in [−scale, scale) rounded to dt:
// drawn and encoded once on the host, uploaded to the backend under test
// (and the peer); the reference's copy is the same bytes (second backend)
// or the backend's own copy cast to f32 on the device (self-reference).
func (p pairRun) values(dt engine.DType, scale float64, shape ...int) twin {
	v, raw := p.draw(dt, scale, engine.Shape(shape).Numel())
	x := p.exact(dt, raw, shape...)
	x.host = v
	return x
}

// draw returns n values uniform in [−scale, scale) rounded to dt, and
// their bytes in dt, from a stream seeded by p.r.
func (p pairRun) draw(dt engine.DType, scale float64, n int) (v []float32, raw []byte) {
	seed, size := p.r.Uint64(), dt.Size()
	v, raw = make([]float32, n), make([]byte, n*size)
	start := time.Now()
	parallel(n, chunk, func(lo, hi int) {
		switch dt {
		case engine.BF16:
			for i := lo; i < hi; i++ {
				h := engine.F32ToBF16(float32((2*uniform(seed, i) - 1) * scale))
				v[i] = engine.BF16ToF32(h)
				binary.LittleEndian.PutUint16(raw[2*i:], h)
			}
		case engine.F32:
			for i := lo; i < hi; i++ {
				v[i] = float32((2*uniform(seed, i) - 1) * scale)
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v[i]))
			}
		default:
			for i := lo; i < hi; i++ {
				v[i] = dt.Round(float32((2*uniform(seed, i) - 1) * scale))
			}
			copy(raw[lo*size:], engine.EncodeF32(dt, v[lo:hi]))
		}
	})
	p.clock.add(phaseDraw, start)
	return v, raw
}

// exact returns a twin holding raw (bytes of dt) on every side. A copy that
// the reference needs in f32 is cast on the device from the backend's; a
// tensor the self-reference mode needs in dt anyway (i32, or f32) is the
// backend's own, shared.
func (p pairRun) exact(dt engine.DType, raw []byte, shape ...int) twin {
	defer p.clock.add(phaseUpload, time.Now())
	up := func(be engine.Backend) *engine.Tensor {
		x := engine.MustAlloc(be, dt, shape...)
		be.Upload(x, raw)
		return x
	}
	x := twin{b: up(p.b)}
	switch {
	case !p.runsRef():
	case !p.self:
		x.ref = up(p.ref)
	case p.refDT(dt) == dt:
		x.ref = x.b
	default:
		x.ref = engine.MustAlloc(p.b, p.refDT(dt), shape...)
		p.b.Cast(x.ref, x.b)
	}
	if p.peer != nil {
		x.peer = up(p.peer)
	}
	return p.owned(x)
}

// ints returns a twin holding v.
func (p pairRun) ints(v []int32, shape ...int) twin {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
	}
	return p.exact(engine.I32, raw, shape...)
}

// f32s returns a twin holding v in f32 on every side.
func (p pairRun) f32s(v []float32, shape ...int) twin {
	x := p.exact(engine.F32, engine.EncodeF32(engine.F32, v), shape...)
	x.host = v
	return x
}

// zeros returns a zeroed twin (the reference's copy in p.refDT(dt)).
func (p pairRun) zeros(dt engine.DType, shape ...int) twin {
	x := twin{b: engine.MustAlloc(p.b, dt, shape...)}
	if p.runsRef() {
		x.ref = engine.MustAlloc(p.ref, p.refDT(dt), shape...)
	}
	if p.peer != nil {
		x.peer = engine.MustAlloc(p.peer, dt, shape...)
	}
	return p.owned(x)
}

// clone returns a new twin holding x's values (copied on each device), for
// an op that writes over its input.
func (p pairRun) clone(x twin) twin {
	y := p.zeros(x.b.DType(), x.b.Shape()...)
	p.run(func(be engine.Backend, at side) { be.Copy(at(y), at(x)) })
	y.host = x.host
	return y
}

// share makes the reference's copy of x hold the backend's values of it
// (upcast in the self-reference mode): a forward result that a backward
// reads, so that both sides differentiate from the same inputs.
func (p pairRun) share(x twin) {
	switch {
	case !p.runsRef() || x.ref == nil || x.ref == x.b:
	case p.self:
		p.b.Cast(x.ref, x.b)
	default: // the same dtype on both backends
		raw := p.download(p.b, x.b)
		defer p.clock.add(phaseUpload, time.Now())
		p.ref.Upload(x.ref, raw)
	}
}

// download returns the bytes of x on be.
func (p pairRun) download(be engine.Backend, x *engine.Tensor) []byte {
	defer p.clock.add(phaseDownload, time.Now())
	raw := make([]byte, x.Bytes())
	be.Download(raw, x)
	return raw
}

// decode converts raw bytes of dt to float32, in parallel.
func (p pairRun) decode(dt engine.DType, raw []byte) []float32 {
	defer p.clock.add(phaseCompare, time.Now())
	size := dt.Size()
	out := make([]float32, len(raw)/size)
	parallel(len(out), chunk, func(lo, hi int) { decodeInto(out[lo:hi], dt, raw[lo*size:hi*size]) })
	return out
}

// decodeInto converts the raw bytes of dt to float32 values in dst,
// len(dst) of them, without allocating.
func decodeInto(dst []float32, dt engine.DType, raw []byte) {
	switch dt {
	case engine.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case engine.BF16:
		for i := range dst {
			dst[i] = engine.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		copy(dst, engine.DecodeF32(dt, raw[:len(dst)*dt.Size()]))
	}
}

// whole returns the backend's values of x.
func (p pairRun) whole(x twin) []float32 { return p.decode(x.b.DType(), p.download(p.b, x.b)) }

// rowsOf returns the backend's values of the given rows (along dimension
// 0) of x, one after another, downloading those rows alone.
func (p pairRun) rowsOf(x twin, rows []int) []float32 {
	var out []float32
	for _, r := range rows {
		v := x.b.Rows(r, r+1)
		out = append(out, p.decode(v.DType(), p.download(p.b, v))...)
	}
	return out
}

// tolFunc is an op's bound against its exact result, by the dtype the
// result is computed in: Tol for a forward, GradTol for a backward.
type tolFunc func(engine.DType) float64

// check compares the backend's x in full with the reference's (where it
// runs) and with the GEMM peer's (where there is one): x is computed in dt
// on the backend and the peer, in p.refDT(dt) on the reference, and each is
// within k of the exact result, so the bound is the sum of the two.
func (p pairRun) check(t *testing.T, what string, x twin, k tolFunc, dt engine.DType) {
	t.Helper()
	if p.runsRef() && x.ref != nil {
		p.compare(t, what+" against the reference", x.b, p.ref, x.ref, k(dt)+k(p.refDT(dt)))
	}
	if x.peer != nil {
		p.compare(t, what+" against the GEMM peer", x.b, p.peer, x.peer, 2*k(dt))
	}
}

// compare fails t when the backend's got is not within tol of want (on
// be), in Close's measure, computed from the raw bytes in parallel chunks.
func (p pairRun) compare(t *testing.T, what string, got *engine.Tensor, be engine.Backend, want *engine.Tensor, tol float64) {
	t.Helper()
	rg, rw := p.download(p.b, got), p.download(be, want)
	defer p.clock.add(phaseCompare, time.Now())
	sg, sw := got.DType().Size(), want.DType().Size()
	parts := make([]diffStats, (got.Numel()+chunk-1)/chunk)
	parallel(got.Numel(), chunk, func(lo, hi int) {
		g, w := make([]float32, hi-lo), make([]float32, hi-lo)
		decodeInto(g, got.DType(), rg[lo*sg:hi*sg])
		decodeInto(w, want.DType(), rw[lo*sw:hi*sw])
		s := diffStatsOf(g, w)
		s.at += lo
		parts[lo/chunk] = s
	})
	reportParts(t, what, parts, tol, got.Shape())
}

// unravel returns the multi-index of flat index i in shape.
func unravel(i int, shape engine.Shape) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

// spot fails t when the backend's values got at the sampled indices idx
// (rows, or columns, each of w elements) are not within tol of the float64
// reference want.
func (p pairRun) spot(t *testing.T, what string, idx []int, w int, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) || len(got) != len(idx)*w {
		panic(fmt.Sprintf("enginetest: spot check %s: %d values, %d reference values, %d indices of %d", what, len(got), len(want), len(idx), w))
	}
	s := diffStatsOf(got, want)
	if e := s.relErr(); !(e <= tol) {
		t.Errorf("%s, float64 spot check at %v: relative error %.3g > %.3g (worst at %d, element %d: got %v, want %v)",
			what, idx, e, tol, idx[s.at/max(w, 1)], s.at%max(w, 1), s.got, s.want)
	}
}

// sampleRows returns the rows of n that the spot checks compute: the first,
// the middle and the last, and two drawn from the halves between them;
// ascending, without repeats.
func (p pairRun) sampleRows(n int) []int { return p.sample(n, 5) }

// sample returns k distinct indices of [0, n) (all of them when n ≤ k),
// ascending: 0, n/2 and n−1, and the rest drawn from p.r.
func (p pairRun) sample(n, k int) []int {
	if n <= k {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all
	}
	seen := map[int]bool{0: true, n / 2: true, n - 1: true}
	for len(seen) < k {
		seen[p.r.IntN(n)] = true
	}
	out := make([]int, 0, k)
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// The phases of an op's host time that clock keeps apart.
const (
	phaseDraw     = iota // drawing and encoding inputs
	phaseUpload          // copies to the devices
	phaseOps             // the ops' calls (their device time too where the backend waits, as with TW_CUDA_SYNC=1)
	phaseDownload        // copies from the devices, waiting for the ops before them
	phaseCompare         // decoding and comparing results
	phaseSpot            // float64 spot checks
	nPhases
)

var phaseNames = [nPhases]string{"draw", "upload", "ops", "download", "compare", "float64 spot checks"}

// clock adds up an op's host time by phase.
type clock struct {
	mu sync.Mutex
	d  [nPhases]time.Duration
}

// add adds the time since start to phase ph.
func (c *clock) add(ph int, start time.Time) {
	c.mu.Lock()
	c.d[ph] += time.Since(start)
	c.mu.Unlock()
}

func (c *clock) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ""
	for i, d := range c.d {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %v", phaseNames[i], d.Round(time.Millisecond))
	}
	return s
}

// reportParts merges the comparison of a tensor of shape made in chunks and
// fails t, naming the worst element, when it is not within tol.
func reportParts(t *testing.T, what string, parts []diffStats, tol float64, shape engine.Shape) {
	t.Helper()
	var all diffStats
	for _, s := range parts {
		all = all.merge(s)
	}
	if e := all.relErr(); !(e <= tol) {
		t.Errorf("%s: relative error %.3g > %.3g (worst at %v of %v: got %v, want %v)",
			what, e, tol, unravel(all.at, shape), shape, all.got, all.want)
	}
}
