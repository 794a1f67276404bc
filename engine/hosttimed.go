package engine

import (
	"errors"
	"time"
)

// ProfiledBackend is a backend that can time its ops.
type ProfiledBackend interface {
	Backend
	OpProfiler
}

// TimeOnHost returns b with each op timed on the host's clock in an op
// profile: an OpProfiler for a backend whose ops are done when they return
// (the CPU backend); for one that queues its ops on a device it would time
// the queueing. Outside a profile an op costs one more call and a test;
// buffers, transfers and Sync go straight to b, untimed. Every op of a
// profile is one call, counted as one launch.
func TimeOnHost(b Backend) ProfiledBackend { return &hostTimed{Backend: b} }

// hostTimed is TimeOnHost's backend.
type hostTimed struct {
	Backend
	on  bool     // a profile is under way
	ops []OpTime // its ops so far
}

// StartOpProfile implements OpProfiler.
func (h *hostTimed) StartOpProfile() error {
	if h.on {
		return errors.New("engine: StartOpProfile: a profile is already under way")
	}
	h.on, h.ops = true, nil
	return nil
}

// StopOpProfile implements OpProfiler: the ops timed since StartOpProfile,
// in the order they ran.
func (h *hostTimed) StopOpProfile() ([]OpTime, error) {
	if !h.on {
		return nil, errors.New("engine: StopOpProfile: no profile under way")
	}
	ops := h.ops
	h.on, h.ops = false, nil
	return ops, nil
}

// time starts timing an op, returning what records it when it is done; it
// does nothing outside a profile. size (nil: the op's element count sets its
// cost) gives the extents, FLOPs and bytes OpTime records.
func (h *hostTimed) time(op string, size func() (string, float64, int64)) func() {
	if !h.on {
		return func() {}
	}
	t0 := time.Now()
	return func() {
		o := OpTime{Op: op, Time: time.Since(t0), Launches: 1}
		if size != nil {
			o.Extents, o.FLOPs, o.Bytes = size()
		}
		h.ops = append(h.ops, o)
	}
}

// The ops, each timed and passed on.

func (h *hostTimed) Copy(dst, src *Tensor) { defer h.time("Copy", nil)(); h.Backend.Copy(dst, src) }
func (h *hostTimed) ScatterRows(dst, src, rows *Tensor) {
	defer h.time("ScatterRows", nil)()
	h.Backend.ScatterRows(dst, src, rows)
}
func (h *hostTimed) Fill(x *Tensor, v float32) { defer h.time("Fill", nil)(); h.Backend.Fill(x, v) }
func (h *hostTimed) Cast(dst, src *Tensor)     { defer h.time("Cast", nil)(); h.Backend.Cast(dst, src) }
func (h *hostTimed) Add(out, a, b *Tensor)     { defer h.time("Add", nil)(); h.Backend.Add(out, a, b) }
func (h *hostTimed) AddBias(x, b *Tensor)      { defer h.time("AddBias", nil)(); h.Backend.AddBias(x, b) }
func (h *hostTimed) AddBiasBackward(db, dOut *Tensor) {
	defer h.time("AddBiasBackward", nil)()
	h.Backend.AddBiasBackward(db, dOut)
}

func (h *hostTimed) Gemm(c, a, b *Tensor, p GemmParams) {
	defer h.time("Gemm", func() (string, float64, int64) { return GemmCost(GemmShape(c, a, b, p), c, a, p.Beta) })()
	h.Backend.Gemm(c, a, b, p)
}

func (h *hostTimed) Embedding(out, table, ids *Tensor) {
	defer h.time("Embedding", nil)()
	h.Backend.Embedding(out, table, ids)
}
func (h *hostTimed) EmbeddingBackward(dTable, dOut, ids *Tensor) {
	defer h.time("EmbeddingBackward", nil)()
	h.Backend.EmbeddingBackward(dTable, dOut, ids)
}
func (h *hostTimed) RMSNorm(out, rstd, x, w *Tensor, eps float32) {
	defer h.time("RMSNorm", nil)()
	h.Backend.RMSNorm(out, rstd, x, w, eps)
}
func (h *hostTimed) AddRMSNorm(resid, out, rstd, x, delta, w *Tensor, eps float32) {
	defer h.time("AddRMSNorm", nil)()
	h.Backend.AddRMSNorm(resid, out, rstd, x, delta, w, eps)
}
func (h *hostTimed) RMSNormBackward(dx, dw, dOut, x, w, rstd *Tensor) {
	defer h.time("RMSNormBackward", nil)()
	h.Backend.RMSNormBackward(dx, dw, dOut, x, w, rstd)
}
func (h *hostTimed) LayerNorm(out, mean, rstd, x, w, b *Tensor, eps float32) {
	defer h.time("LayerNorm", nil)()
	h.Backend.LayerNorm(out, mean, rstd, x, w, b, eps)
}
func (h *hostTimed) LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd *Tensor) {
	defer h.time("LayerNormBackward", nil)()
	h.Backend.LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd)
}
func (h *hostTimed) GELU(out, x *Tensor, k GELUKind) {
	defer h.time("GELU", nil)()
	h.Backend.GELU(out, x, k)
}
func (h *hostTimed) GELUBackward(dx, dOut, x *Tensor, k GELUKind) {
	defer h.time("GELUBackward", nil)()
	h.Backend.GELUBackward(dx, dOut, x, k)
}
func (h *hostTimed) Dropout(out, x *Tensor, p DropoutParams) {
	defer h.time("Dropout", nil)()
	h.Backend.Dropout(out, x, p)
}
func (h *hostTimed) RoPE(x, pos, invFreq *Tensor) {
	defer h.time("RoPE", nil)()
	h.Backend.RoPE(x, pos, invFreq)
}
func (h *hostTimed) RoPEBackward(dx, pos, invFreq *Tensor) {
	defer h.time("RoPEBackward", nil)()
	h.Backend.RoPEBackward(dx, pos, invFreq)
}

func (h *hostTimed) Attention(out, lse, q, k, v, seqs *Tensor, p AttentionParams) {
	defer h.time("Attention", func() (string, float64, int64) {
		return AttentionExtents(AttentionShape("Attention", lse, q, k, v, seqs)), 0, 0
	})()
	h.Backend.Attention(out, lse, q, k, v, seqs, p)
}

func (h *hostTimed) AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *Tensor, p AttentionParams) {
	defer h.time("AttentionBackward", func() (string, float64, int64) {
		return AttentionExtents(AttentionShape("AttentionBackward", lse, q, k, v, seqs)), 0, 0
	})()
	h.Backend.AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs, p)
}

func (h *hostTimed) SwiGLU(out, gate, up *Tensor) {
	defer h.time("SwiGLU", nil)()
	h.Backend.SwiGLU(out, gate, up)
}
func (h *hostTimed) SwiGLUBackward(dGate, dUp, dOut, gate, up *Tensor) {
	defer h.time("SwiGLUBackward", nil)()
	h.Backend.SwiGLUBackward(dGate, dUp, dOut, gate, up)
}
func (h *hostTimed) LogSoftmaxGather(logp, lse, logits, targets *Tensor) {
	defer h.time("LogSoftmaxGather", nil)()
	h.Backend.LogSoftmaxGather(logp, lse, logits, targets)
}
func (h *hostTimed) LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *Tensor) {
	defer h.time("LogSoftmaxGatherBackward", nil)()
	h.Backend.LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets)
}
func (h *hostTimed) SumSquares(out, x *Tensor) {
	defer h.time("SumSquares", nil)()
	h.Backend.SumSquares(out, x)
}
func (h *hostTimed) AdamW(param, grad, m, v, master *Tensor, p AdamWParams) {
	defer h.time("AdamW", nil)()
	h.Backend.AdamW(param, grad, m, v, master, p)
}
func (h *hostTimed) AdamWMulti(t *ParamTable, grad, m, v, master *Tensor, p AdamWParams) {
	defer h.time("AdamWMulti", nil)()
	h.Backend.AdamWMulti(t, grad, m, v, master, p)
}
func (h *hostTimed) Sample(ids, logits, u *Tensor, p SampleParams) {
	defer h.time("Sample", nil)()
	h.Backend.Sample(ids, logits, u, p)
}
