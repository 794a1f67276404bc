// Package engine defines turnwise's tensors, dtypes and the Backend interface:
// the complete set of operations the Llama model and the trainers are written
// against. Concrete backends live in engine/cpu (the reference, default
// everywhere) and engine/cuda (hand-written CUDA kernels, or the same kernels
// under the CPU emulator); engine/ref holds float64 references of the ops and
// engine/enginetest the conformance suite every backend passes.
//
// The package holds, by file:
//
//	backend.go     Backend, every op's contract, and the op parameters
//	               (GemmParams, AttentionParams, GELUKind, AdamWParams,
//	               SampleParams)
//	dropout.go     DropoutParams, Dropout's mask: a counter-based hash of
//	               (seed, element index) every backend computes alike
//	record.go      Recorder and Recording: ops recorded once and replayed
//	               (CUDA graphs), and LaunchCounter
//	opprofile.go   OpProfiler: each op's device time, where a step's time
//	               goes
//	tensor.go      Tensor, Shape, Buffer, Device, and the MustShape,
//	               MustDType, MustSameShape checks
//	dtype.go       DType and its conversions and rounding (bf16, f16)
//	check.go       the shape checks every backend runs before an op
//	               (GemmShape, NormShape, AttentionShape, …)
//	paramtable.go  ParamTable, the parameter table of AdamWMulti
//	rope.go        RoPEFreqs, RoPE's frequencies with Llama 3.1 scaling
//	compose.go     ops composed of Backend ops, with no kernels of their own:
//	               TokenLogProbs (and its backward, and the fused pair),
//	               GlobalNorm, ClipScale
//	pool.go        Pool, a caching allocator of tensors
//	host.go        moving values between the host and tensors (FromF32,
//	               ToF32, EncodeF32, …) and Alloc
//
// Every op's contract is written once, here, on its Backend method: shapes,
// dtypes, what is overwritten and what is accumulated into. Shapes use these
// letters:
//
//	N  tokens (all sequences of a batch packed together)
//	B  sequences in a batch
//	D  model (hidden) width, V vocabulary size
//	H  query heads, G key/value heads (H is a multiple of G), Dh head width
//	M, K, N  matrix extents of a GEMM
//
// An argument's dtype is written after its shape, e.g. x [N, D] f32|bf16.
// "float" means f32 or bf16. Unless a contract says otherwise every tensor
// argument is distinct (no aliasing) and every output is overwritten.
//
// Numerics follow Hugging Face's Llama: reductions and transcendental
// functions run in f32, and a bf16 result is rounded (to nearest even) once
// per value that PyTorch would materialise in bf16.
package engine

import "fmt"

// GemmParams selects the variant of a GEMM: C = Alpha·op(A)·op(B) + Beta·C.
type GemmParams struct {
	TransA bool    // op(A) = Aᵀ
	TransB bool    // op(B) = Bᵀ
	Alpha  float32 // scale of the product
	Beta   float32 // scale of the previous C (0: C is overwritten, never read)
}

// AttentionParams select the variant of Attention and AttentionBackward.
type AttentionParams struct {
	// Scale multiplies every score q·k before the softmax (1/√Dh as a rule).
	Scale float32
	// NonCausal lets every query of a sequence see all kLen keys of its
	// sequence (a vision transformer's attention). The zero value is causal
	// attention: query t sees keys 0 … t+kLen−qLen.
	NonCausal bool
}

// GELUKind selects the GELU of GELU and GELUBackward.
type GELUKind int

// The GELUs. Φ is the standard normal CDF, σ the logistic sigmoid.
const (
	// GELUErf is the exact GELU: x·Φ(x) = x·(1 + erf(x/√2))/2.
	GELUErf GELUKind = iota
	// GELUTanh is the tanh approximation:
	// x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
	GELUTanh
	// GELUQuick is CLIP's quick_gelu: x·σ(1.702·x).
	GELUQuick
)

// String returns the kind's name: "erf", "tanh" or "quick".
func (k GELUKind) String() string {
	switch k {
	case GELUErf:
		return "erf"
	case GELUTanh:
		return "tanh"
	case GELUQuick:
		return "quick"
	}
	return fmt.Sprintf("GELUKind(%d)", int(k))
}

// AdamWParams are the hyper-parameters of one AdamW update. Step is the
// 1-based step number used for bias correction. GradScale multiplies every
// gradient before use; it carries gradient clipping and the averaging of
// accumulated micro-batches into the update without an extra pass.
type AdamWParams struct {
	LR          float32
	Beta1       float32
	Beta2       float32
	Eps         float32
	WeightDecay float32
	Step        int
	GradScale   float32
}

// SampleParams select how the next token is drawn from logits.
//
// Temperature ≤ 0 means greedy: the argmax, the lowest index on ties.
// Otherwise the weights are e_v = exp((logit_v − max)/Temperature), and the
// tokens are ranked by descending weight, ties: lower index first. The
// candidates are narrowed in two steps, top-k before top-p (the order of
// Hugging Face's and vLLM's samplers): with 0 < TopK < V, the first TopK
// tokens of the ranking, otherwise all tokens; then, with 0 < TopP < 1, the
// shortest prefix of the ranking within those whose weights sum to at least
// TopP·(their total), otherwise all of them. The token drawn is the first
// candidate, in index order, at which the running sum of candidate weights
// exceeds u·(the candidates' total). Every backend follows this rule —
// index order makes it a prefix sum, which a GPU computes without sorting —
// so a seeded run draws the same tokens everywhere (up to ties broken by
// rounding).
type SampleParams struct {
	Temperature float32
	TopP        float32
	// TopK is the number of heaviest tokens kept before TopP applies; 0 (or
	// any value outside (0, V)) keeps all. TopK = 1 draws the argmax.
	TopK int
}

// Backend is one implementation of the op set. A Backend may run ops
// asynchronously (on a GPU stream); Download and Sync wait for completed work.
// A Backend is not safe for concurrent use by several goroutines.
type Backend interface {
	// Name identifies the backend: "cpu", "cuda", "cudaemu".
	Name() string
	// Device is where the backend's buffers live.
	Device() Device

	// NewBuffer allocates nbytes of device memory, zeroed.
	NewBuffer(nbytes int) (Buffer, error)
	// FreeBuffer releases a buffer from NewBuffer. Tensors viewing it must
	// no longer be used.
	FreeBuffer(Buffer)
	// Upload copies len(src) == dst.Bytes() bytes, already in dst's dtype
	// and little-endian element layout, into dst.
	Upload(dst *Tensor, src []byte)
	// Download copies src into dst (len(dst) == src.Bytes()), waiting for
	// pending work that writes src.
	Download(dst []byte, src *Tensor)
	// Sync waits for all submitted work.
	Sync() error

	// Copy: dst = src. Same dtype and element count (shapes may differ).
	Copy(dst, src *Tensor)
	// ScatterRows copies src's rows to the rows of dst that rows names:
	// dst[rows[i], …] = src[i, …] for every i; other rows of dst are left
	// as they are. The indices are read on the device, so a recorded
	// ScatterRows (see Recorder) writes wherever rows points when replayed.
	//   dst [R, …], src [N, …] of dst's dtype and row shape, rows [N] i32,
	//   distinct, in [0, R)
	ScatterRows(dst, src, rows *Tensor)
	// Fill sets every element of a float tensor to v (rounded to its dtype).
	Fill(x *Tensor, v float32)
	// Cast: dst = src converted element-wise, any of f32, bf16, f16 to any
	// other (or the same); rounding to nearest even. Same element count.
	Cast(dst, src *Tensor)
	// Add: out = a + b, all float of one shape and dtype; out may alias a
	// or b.
	Add(out, a, b *Tensor)
	// AddBias adds a bias to every row, in place: x[i, :] += b.
	//   x [N, D] float, b [D] of x's dtype
	// The sum is rounded once to x's dtype.
	AddBias(x, b *Tensor)
	// AddBiasBackward accumulates the bias gradient: db += Σ_i dOut[i, :],
	// summed in f32 or wider in a fixed order (the same bits whatever the
	// thread count), as RMSNormBackward accumulates dw. The gradient of x is
	// dOut itself (the caller keeps using it).
	//   db [D] f32 (or dOut's dtype), dOut [N, D] float
	AddBiasBackward(db, dOut *Tensor)

	// Gemm: C = Alpha·op(A)·op(B) + Beta·C with f32 accumulation.
	//   A [batch…, M, K] (or [batch…, K, M] if TransA) float
	//   B [batch…, K, N] (or [batch…, N, K] if TransB) float
	//   C [batch…, M, N] float
	// A and B must share a dtype; C may be f32 or A's dtype. The batch
	// dimensions of A and B either equal C's or are absent (broadcast), which
	// makes it strided-batched. With Beta == 0, C is not read (NaN in C does
	// not propagate).
	Gemm(c, a, b *Tensor, p GemmParams)

	// Embedding: out[i, :] = table[ids[i], :].
	//   out [N, D] float, table [V, D] float, ids [N] i32 in [0, V)
	Embedding(out, table, ids *Tensor)
	// EmbeddingBackward: dTable[ids[i], :] += dOut[i, :], accumulated in
	// token order, so that repeated ids sum deterministically.
	//   dTable [V, D] float, dOut [N, D] float, ids [N] i32
	EmbeddingBackward(dTable, dOut, ids *Tensor)

	// RMSNorm: rstd[i] = 1/sqrt(mean_j x[i,j]² + eps);
	// out[i,j] = w[j] · round(x[i,j]·rstd[i]) (HF: normalise in f32, cast to
	// the activation dtype, then multiply by the weight).
	//   out [N, D] float, rstd [N] f32, x [N, D] float, w [D] float
	RMSNorm(out, rstd, x, w *Tensor, eps float32)
	// AddRMSNorm fuses the residual add: resid = x + delta, then RMSNorm of
	// resid into out and rstd. resid may alias x (an in-place residual
	// stream); shapes as for RMSNorm, resid, x, delta [N, D] of one dtype.
	AddRMSNorm(resid, out, rstd, x, delta, w *Tensor, eps float32)
	// RMSNormBackward accumulates: with n = x·rstd and g = dOut·w,
	//   dx += rstd·(g − n·mean_j(g·n)),  dw += Σ_i dOut·n.
	// dx [N, D] float, dw [D] float (nil: frozen weight), other args as in
	// RMSNorm. dx accumulates so that the residual stream's gradient flows
	// through unchanged: the caller passes the residual gradient as dx.
	RMSNormBackward(dx, dw, dOut, x, w, rstd *Tensor)

	// LayerNorm, with a weight and a bias: per row i (f32 arithmetic)
	//   mean[i] = Σ_j x[i,j]/D,
	//   rstd[i] = 1/sqrt(Σ_j (x[i,j]−mean[i])²/D + eps),
	//   out[i,j] = (x[i,j]−mean[i])·rstd[i]·w[j] + b[j], rounded once to
	//   out's dtype (as PyTorch's layer_norm computes a bf16 input).
	//   out, x [N, D] float of one dtype; w, b [D] of x's dtype (or both
	//   f32); mean, rstd [N] f32
	LayerNorm(out, mean, rstd, x, w, b *Tensor, eps float32)
	// LayerNormBackward, with n = (x − mean)·rstd and g = dOut·w:
	//   dx = rstd·(g − mean_j(g) − n·mean_j(g·n))   (overwritten),
	//   dw += Σ_i dOut·n,  db += Σ_i dOut           (accumulated),
	// dw and db as RMSNormBackward treats dw: accumulated over the rows in a
	// fixed order, rounded once to their dtype, nil for a frozen weight or
	// bias. Unlike RMSNormBackward, dx is overwritten: a pre-norm block adds
	// it to the residual gradient itself.
	//   dx, dOut [N, D] of x's dtype; dw, db [D] of w's dtype (or nil);
	//   other arguments as in LayerNorm (mean and rstd from the forward).
	LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd *Tensor)

	// GELU: out = gelu_k(x) element-wise, computed in f32 and rounded once,
	// except GELUQuick, which rounds as PyTorch's x·sigmoid(1.702·x) does
	// in bf16: out = round(x·round(σ(round(1.702·x)))).
	//   out, x any shape of one element count, float of one dtype
	GELU(out, x *Tensor, k GELUKind)
	// GELUBackward: dx = dOut·gelu_k'(x), computed in f32 from x (for
	// GELUQuick the derivative of the exact x·σ(1.702·x)) and rounded once;
	// dx overwritten, shapes and dtypes as for GELU.
	GELUBackward(dx, dOut, x *Tensor, k GELUKind)

	// Dropout: out[i] = x[i]·Scale() where p.Keep(i), else 0, for every
	// element of the flat index i (counted from the tensor's first element,
	// not its buffer's), the product in f32 rounded once to out's dtype.
	// The mask is a pure function of p (see DropoutParams), so the
	// backward of a dropout is Dropout of its output gradient with the same
	// p, and a P of 0 copies x exactly.
	//   out, x [any] float of one shape and dtype; out may alias x;
	//   p.P in [0, 1)
	Dropout(out, x *Tensor, p DropoutParams)

	// RoPE rotates, in place, each head of x by its token's position in the
	// rotate-half layout: for pair (j, j+Dh/2) and angle a = pos[i]·invFreq[j]
	// (f32 product; cos and sin in f32), (x1, x2) ← (x1·cos a − x2·sin a,
	// x2·cos a + x1·sin a).
	//   x [N, H, Dh] float, pos [N] i32, invFreq [Dh/2] f32 (see RoPEFreqs)
	RoPE(x, pos, invFreq *Tensor)
	// RoPEBackward applies the inverse rotation to a gradient, in place.
	RoPEBackward(dx, pos, invFreq *Tensor)

	// Attention is scaled-dot-product attention with grouped-query heads
	// over packed variable-length sequences, causal unless p.NonCausal.
	// Query head h reads key/value head h/(H/G). seqs[b] = (qStart, qLen,
	// kStart, kLen), with qLen ≤ kLen: the sequence's queries are rows
	// qStart… of q and its keys rows kStart… of k and v. Causal, query t
	// (0-based) sees keys 0 … t+kLen−qLen — so training (qLen == kLen),
	// prefill and decoding with a KV cache are the same op; non-causal, every
	// query sees all kLen keys of its sequence. Scores are scaled by p.Scale,
	// softmax in f32.
	//   out [Nq, H, Dh] float (q's dtype), lse [Nq, H] f32 (log-sum-exp of the
	//   scaled scores, saved for the backward), q [Nq, H, Dh], k, v
	//   [Nk, G, Dh] float, seqs [B, 4] i32
	// Sequences' query ranges must not overlap (each output row has one
	// owner); their key ranges may, in the forward. Rows of out and lse that
	// no sequence covers are left untouched.
	Attention(out, lse, q, k, v, seqs *Tensor, p AttentionParams)
	// AttentionBackward computes dq, dk, dv from dOut and the forward's
	// out and lse. dq, dk and dv are overwritten (rows no sequence covers
	// are zeroed); dk and dv sum over the H/G query heads that share them.
	// Here the sequences' key ranges must not overlap either. p as in the
	// forward.
	//   dq [Nq, H, Dh], dk, dv [Nk, G, Dh], dOut [Nq, H, Dh], all float
	AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *Tensor, p AttentionParams)

	// SwiGLU: out = round(silu(gate)) · up, silu(g) = g·sigmoid(g).
	//   out, gate, up [N, F] float of one dtype
	SwiGLU(out, gate, up *Tensor)
	// SwiGLUBackward: dGate = dOut·up·silu'(gate), dUp = dOut·silu(gate);
	// both overwritten, shapes as for SwiGLU.
	SwiGLUBackward(dGate, dUp, dOut, gate, up *Tensor)

	// LogSoftmaxGather: per row i with target t = targets[i],
	// lse[i] = log Σ_v exp(logits[i, v]) and logp[i] = logits[i, t] − lse[i]
	// (all in f32). A negative target marks an ignored row: logp[i] = 0.
	//   logp [N] f32, lse [N] f32, logits [N, V] float, targets [N] i32
	LogSoftmaxGather(logp, lse, logits, targets *Tensor)
	// LogSoftmaxGatherBackward:
	// dLogits[i, v] = dLogp[i]·(1[v == t] − exp(logits[i, v] − lse[i])), and
	// 0 on ignored rows. dLogits may alias logits (computed in place).
	LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *Tensor)

	// SumSquares: out[0] += Σ x², summed in f64 over fixed chunks in a fixed
	// order, so the result does not depend on the thread count. Used for the
	// global gradient norm. out [1] f32, x float.
	SumSquares(out, x *Tensor)

	// AdamW updates one parameter tensor in place (decoupled weight decay,
	// bias correction, as torch.optim.AdamW):
	//   g ← GradScale·grad; m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²
	//   p ← p − LR·(WeightDecay·p + (m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + Eps))
	// param, grad float; m, v f32 of param's element count. When master is
	// non-nil (required for bf16 or f16 params) the update is applied to the
	// f32 master copy and param receives it rounded.
	AdamW(param, grad, m, v, master *Tensor, p AdamWParams)
	// AdamWMulti applies AdamW's update to every parameter of t at once:
	// for each span s of t, the update of AdamW with
	//   param = s.W, grad, m, v = elements [s.Off, s.Off+n) of grad, m, v,
	//   master = elements [s.MasterOff, s.MasterOff+n) of master (none when
	//   s.MasterOff < 0), n = s.W.Numel(),
	// computed element by element exactly as AdamW computes it (the same
	// bits). Elements of grad, m and v outside every span are neither read
	// nor written. grad [N] float, m, v [N] f32 with N ≥ t.End(); master
	// [Nm] f32 with Nm ≥ t.MasterEnd(), or nil when no span has a master.
	// A backend may keep its own form of t (a table on the device) in t's
	// cache, made on the first call (see ParamTable).
	AdamWMulti(t *ParamTable, grad, m, v, master *Tensor, p AdamWParams)

	// Sample draws one token per row of logits into ids using the caller's
	// uniform random numbers u in [0, 1), one per row, so results are
	// reproducible on every backend. See SampleParams.
	//   ids [B] i32, logits [B, V] float, u [B] f32
	Sample(ids, logits, u *Tensor, p SampleParams)
}
