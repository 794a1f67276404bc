package engine

import (
	"errors"
	"fmt"
	"time"
)

// OpProfiler is implemented by a backend that can measure the device time
// of each op it queues — where a step's time goes, op by op, as a
// profiler's kernel table shows it. Profiling changes what it measures only
// by the timing marks it puts between ops; a backend refuses to record
// (Recorder) while a profile is under way, so that every op of a step
// that would be replayed as one recording is timed on its own.
type OpProfiler interface {
	// StartOpProfile begins timing every op queued from now on. It fails
	// if a profile is already under way or a recording is being made.
	StartOpProfile() error
	// StopOpProfile ends the profile, waits for the device to finish the
	// profiled ops, and returns their times in the order they were queued.
	StopOpProfile() ([]OpTime, error)
}

// OpTime is one profiled op.
type OpTime struct {
	// Op names the op as the backend's errors do ("Gemm (cuBLASLt)",
	// "AttentionBackward", "Replay" for a replayed recording).
	Op string
	// Extents are, for the ops whose cost depends on more than their
	// element count, the extents that set it: a GEMM's "M×N×K", batched
	// "B×M×N×K"; attention's "Nq×H×Dh, Nk keys". Empty for the others.
	Extents string
	// FLOPs is the op's arithmetic where its extents alone set it (a GEMM:
	// 2·B·M·N·K), else 0.
	FLOPs float64
	// Bytes is the least memory traffic of the ops that have FLOPs: a
	// GEMM's A, B and C once each (C twice when it accumulates).
	Bytes int64
	// Time is the device time from the op's first launch starting to its
	// last one ending.
	Time time.Duration
	// Launches are the kernels, device copies and memsets the op queued (a
	// replayed recording's: all it holds).
	Launches int64
}

// ErrNoOpProfiler is ProfileOps' error on a backend that cannot profile.
var ErrNoOpProfiler = errors.New("the backend cannot time its ops")

// ProfileOps calls fn with an op profile of b under way and returns the
// profiled ops (OpProfiler), or ErrNoOpProfiler when b cannot profile. fn's
// error, or a panic in it — a failing op panics — ends the profile and is
// returned.
func ProfileOps(b Backend, fn func() error) (ops []OpTime, err error) {
	p, ok := b.(OpProfiler)
	if !ok {
		return nil, ErrNoOpProfiler
	}
	if err := p.StartOpProfile(); err != nil {
		return nil, err
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		err = fn()
	}()
	ops, stopErr := p.StopOpProfile()
	if err != nil {
		return nil, err
	}
	return ops, stopErr
}

// GemmCost is what an op profile records of the GEMM c = α·op(a)·op(b) +
// β·c of extents g (GemmShape): its extents M×N×K (batched B×M×N×K), its
// 2·B·M·N·K FLOPs, and its least memory traffic, A, B and C once each (C
// twice when β ≠ 0, a broadcast operand once).
func GemmCost(g GemmDims, c, a *Tensor, beta float32) (extents string, flops float64, bytes int64) {
	batches := func(stride int) int64 {
		if stride == 0 {
			return 1
		}
		return int64(g.Batch)
	}
	cBytes := int64(g.Batch) * int64(g.M) * int64(g.N) * int64(c.DType().Size())
	if beta != 0 {
		cBytes *= 2
	}
	bytes = (batches(g.StrideA)*int64(g.M)*int64(g.K)+batches(g.StrideB)*int64(g.K)*int64(g.N))*int64(a.DType().Size()) + cBytes
	extents = fmt.Sprintf("%d×%d×%d", g.M, g.N, g.K)
	if g.Batch > 1 {
		extents = fmt.Sprintf("%d×%s", g.Batch, extents)
	}
	return extents, 2 * float64(g.Batch) * float64(g.M) * float64(g.N) * float64(g.K), bytes
}

// AttentionExtents is an attention op's extents in an op profile: query
// rows × heads × head width, and the keys (its arithmetic depends on the
// sequences, which a backend may not read cheaply).
func AttentionExtents(d AttentionDims) string {
	return fmt.Sprintf("%d×%d×%d, %d keys", d.NQ, d.H, d.Dh, d.NK)
}
