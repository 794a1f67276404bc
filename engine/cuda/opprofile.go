//go:build cuda || cudaemu

package cuda

// #include <cuda_runtime_api.h>
import "C"

import (
	"errors"
	"fmt"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// opProfile is an op profile under way (StartOpProfile): the ops queued
// since, each between a pair of events recorded on the stream.
type opProfile struct {
	ops []timedOp
}

// timedOp is one profiled op: its name and size, the events before and
// after its launches, and how many it queued.
type timedOp struct {
	op          string
	size        opSize
	start, stop C.cudaEvent_t
	launches    int64
}

// opSize is what a profile says of an op's size (engine.OpTime's Extents
// and FLOPs); the zero value for the ops whose element count sets their
// cost.
type opSize struct {
	extents string
	flops   float64
}

// StartOpProfile implements engine.OpProfiler.
func (b *Backend) StartOpProfile() error {
	switch {
	case b.prof != nil:
		return errors.New("cuda: StartOpProfile: a profile is already under way")
	case b.rec != nil:
		return errors.New("cuda: StartOpProfile: a recording is under way")
	}
	b.prof = &opProfile{}
	return nil
}

// StopOpProfile implements engine.OpProfiler: it waits for the stream and
// reads each op's pair of events. The events are kept for the next profile.
func (b *Backend) StopOpProfile() ([]engine.OpTime, error) {
	p := b.prof
	if p == nil {
		return nil, errors.New("cuda: StopOpProfile: no profile under way")
	}
	b.prof = nil
	b.enter()
	defer b.exit()
	defer func() {
		for _, o := range p.ops {
			b.events = append(b.events, o.start, o.stop)
		}
	}()
	if err := b.dev.sync(); err != nil {
		return nil, fmt.Errorf("cuda: op profile: %w", err)
	}
	out := make([]engine.OpTime, len(p.ops))
	for i, o := range p.ops {
		var ms C.float
		if err := rtErr("cudaEventElapsedTime", C.cudaEventElapsedTime(&ms, o.start, o.stop)); err != nil {
			return nil, fmt.Errorf("cuda: op profile: %s: %w", o.op, err)
		}
		out[i] = engine.OpTime{Op: o.op, Extents: o.size.extents, FLOPs: o.size.flops, Time: time.Duration(float64(ms) * float64(time.Millisecond)), Launches: o.launches}
	}
	return out, nil
}

// profiling reports whether the ops queued now are timed: a profile is
// under way and no recording (whose capture an event would join).
func (b *Backend) profiling() bool { return b.prof != nil && b.rec == nil }

// opMark records an event where the stream has got to, before an op's
// launches, and returns it; nil when the op is not timed. Called between
// enter and exit.
func (b *Backend) opMark() C.cudaEvent_t {
	if !b.profiling() {
		return nil
	}
	var ev C.cudaEvent_t
	if n := len(b.events); n > 0 {
		ev, b.events = b.events[n-1], b.events[:n-1]
	} else if err := rtErr("cudaEventCreate", C.cudaEventCreate(&ev)); err != nil {
		panic(fmt.Sprintf("cuda: op profile: %v", err))
	}
	if err := rtErr("cudaEventRecord", C.cudaEventRecord(ev, b.stream)); err != nil {
		b.events = append(b.events, ev)
		panic(fmt.Sprintf("cuda: op profile: %v", err))
	}
	return ev
}

// opDone closes the op opMark began with start (nil: not timed): it
// records the end event and keeps the op, or drops it when it queued
// nothing. Called between enter and exit.
func (b *Backend) opDone(op string, size opSize, start C.cudaEvent_t, launches int64) {
	if start == nil {
		return
	}
	if launches == 0 {
		b.events = append(b.events, start)
		return
	}
	stop := b.opMark()
	b.prof.ops = append(b.prof.ops, timedOp{op: op, size: size, start: start, stop: stop, launches: launches})
}

// destroyEvents releases the profile's events: the kept ones and those of
// a profile still under way. Called between enter and exit.
func (b *Backend) destroyEvents() {
	if b.prof != nil {
		for _, o := range b.prof.ops {
			b.events = append(b.events, o.start, o.stop)
		}
		b.prof = nil
	}
	for _, ev := range b.events {
		C.cudaEventDestroy(ev)
	}
	b.events = nil
}

// gemmSize is a GEMM's size in a profile: M×N×K (batched B×M×N×K) and
// 2·B·M·N·K FLOPs; none when no profile is under way.
func (b *Backend) gemmSize(g engine.GemmDims) opSize {
	switch {
	case !b.profiling():
		return opSize{}
	case g.Batch > 1:
		return opSize{fmt.Sprintf("%d×%d×%d×%d", g.Batch, g.M, g.N, g.K), 2 * float64(g.Batch) * float64(g.M) * float64(g.N) * float64(g.K)}
	}
	return opSize{fmt.Sprintf("%d×%d×%d", g.M, g.N, g.K), 2 * float64(g.M) * float64(g.N) * float64(g.K)}
}

// attentionSize is an attention op's size in a profile: query rows × heads
// × head width, and the keys (its arithmetic depends on the sequences, in
// device memory); none when no profile is under way.
func (b *Backend) attentionSize(d engine.AttentionDims) opSize {
	if !b.profiling() {
		return opSize{}
	}
	return opSize{extents: fmt.Sprintf("%d×%d×%d, %d keys", d.NQ, d.H, d.Dh, d.NK)}
}
