//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"errors"
	"fmt"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// opProfile is an op profile under way (StartOpProfile): the ops queued
// since, each between a pair of events recorded on the stream.
//
// An op's time runs from its start event to its stop event, so a device
// that reaches the start event before the host has queued the op (a run of
// small ops, each queued more slowly than the one before it runs) would
// count the wait as the op's. So the first op queued after the device has
// caught up with the host (the profile's start, or a synchronisation:
// Sync, Download, and Upload, whose copy from pageable memory waits for the
// stream) is preceded by a hold (tw_hold) that keeps the device
// busy while the host queues what follows: half as long again as the host
// took to queue the previous run up to its synchronisation (2 ms at first;
// between 100 µs and 20 ms). Held runs start when the one before ends, as
// in a replayed graph.
type opProfile struct {
	ops    []timedOp
	held   bool          // a hold is queued and the host has not synchronised since
	heldAt time.Time     // when it was queued
	hold   time.Duration // the next hold
}

// Holds: the first, and the least and most.
const (
	firstHold = 2 * time.Millisecond
	minHold   = 100 * time.Microsecond
	maxHold   = 20 * time.Millisecond
)

// timedOp is one profiled op: its name and size, the events before and
// after its launches, and how many it queued.
type timedOp struct {
	op          string
	size        opSize
	start, stop C.cudaEvent_t
	launches    int64
}

// opSize is what a profile says of an op's size (engine.OpTime's Extents,
// FLOPs and Bytes); the zero value for the ops whose element count sets
// their cost.
type opSize struct {
	extents string
	flops   float64
	bytes   int64
}

// StartOpProfile implements engine.OpProfiler.
func (b *Backend) StartOpProfile() error {
	switch {
	case b.prof != nil:
		return errors.New("cuda: StartOpProfile: a profile is already under way")
	case b.rec != nil:
		return errors.New("cuda: StartOpProfile: a recording is under way")
	}
	b.prof = &opProfile{hold: firstHold}
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
		out[i] = engine.OpTime{Op: o.op, Extents: o.size.extents, FLOPs: o.size.flops, Bytes: o.size.bytes, Time: time.Duration(float64(ms) * float64(time.Millisecond)), Launches: o.launches}
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
	if p := b.prof; !p.held {
		if err := rtErr("tw_hold", C.tw_hold(C.int64_t(p.hold.Nanoseconds()), b.stream)); err != nil {
			panic(fmt.Sprintf("cuda: op profile: %v", err))
		}
		p.held, p.heldAt = true, time.Now()
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

// synced notes that the host has waited for the device: the next op
// profiled is held again, for half as long again as the host took to
// queue the ops since the last hold (see opProfile). Called between enter
// and exit, after the synchronisation.
func (b *Backend) synced() {
	if p := b.prof; p != nil && p.held {
		p.held = false
		p.hold = min(max(time.Since(p.heldAt)*3/2, minHold), maxHold)
	}
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

// gemmSize is the size in a profile of the GEMM c = α·op(a)·op(b) + β·c of
// extents g (engine.GemmCost); none when no profile is under way.
func (b *Backend) gemmSize(g engine.GemmDims, c, a *engine.Tensor, beta float32) opSize {
	if !b.profiling() {
		return opSize{}
	}
	var s opSize
	s.extents, s.flops, s.bytes = engine.GemmCost(g, c, a, beta)
	return s
}

// attentionSize is an attention op's size in a profile
// (engine.AttentionExtents); none when no profile is under way.
func (b *Backend) attentionSize(d engine.AttentionDims) opSize {
	if !b.profiling() {
		return opSize{}
	}
	return opSize{extents: engine.AttentionExtents(d)}
}
