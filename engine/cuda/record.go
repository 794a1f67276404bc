//go:build cuda || cudaemu

package cuda

// #include <cuda_runtime_api.h>
import "C"

import (
	"errors"
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// recording is an instantiated CUDA graph: the work one Record captured on
// the backend's stream.
type recording struct {
	b        *Backend
	exec     C.cudaGraphExec_t
	launches int64 // the kernels, copies and memsets it holds
}

// Record implements engine.Recorder by stream capture: fn's launches,
// copies and memsets are captured on the backend's stream (global mode,
// so that an allocation, an upload or a synchronisation anywhere while it
// captures fails the capture instead of being baked in) and the graph is
// instantiated. A panic in fn — an op that cannot be captured panics with
// the runtime's error — ends the capture and becomes Record's error. It
// refuses with Options.NoGraphs or TW_CUDA_GRAPHS=0, and with TW_CUDA_SYNC=1, whose
// synchronisation after every op a capture cannot hold. Recordings must be
// freed before the backend is closed.
func (b *Backend) Record(fn func()) (_ engine.Recording, err error) {
	switch {
	case b.noGraphs:
		return nil, errors.New("cuda: recording: graphs are turned off (Options.NoGraphs or TW_CUDA_GRAPHS=0)")
	case b.syncEach:
		return nil, errors.New("cuda: recording: TW_CUDA_SYNC=1 synchronises after every op, which a graph cannot hold")
	case b.rec != nil:
		return nil, errors.New("cuda: recording: Record called while recording")
	case b.prof != nil:
		return nil, errors.New("cuda: recording: an op profile is under way (each op is timed on its own)")
	}
	b.enter()
	e := C.cudaStreamBeginCapture(b.stream, C.cudaStreamCaptureModeGlobal)
	b.exit()
	if err := rtErr("cudaStreamBeginCapture", e); err != nil {
		return nil, fmt.Errorf("cuda: recording: %w", err)
	}
	r := &recording{b: b}
	b.rec = r
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		fn()
	}()
	b.rec = nil
	b.enter()
	defer b.exit()
	var g C.cudaGraph_t
	if endErr := rtErr("cudaStreamEndCapture", C.cudaStreamEndCapture(b.stream, &g)); err == nil {
		err = endErr
	}
	if g != nil {
		defer C.cudaGraphDestroy(g)
	}
	if err == nil {
		err = rtErr("cudaGraphInstantiateWithFlags", C.cudaGraphInstantiateWithFlags(&r.exec, g, 0))
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: recording: %w", err)
	}
	b.recordings++
	return r, nil
}

// Replay implements engine.Recording: one launch of the graph.
func (r *recording) Replay() error {
	b := r.b
	if r.exec == nil {
		panic("cuda: Replay of a freed recording")
	}
	b.enter()
	defer b.exit()
	start := b.opMark()
	if err := rtErr("cudaGraphLaunch", C.cudaGraphLaunch(r.exec, b.stream)); err != nil {
		b.opDone("Replay", opSize{}, start, 0)
		return fmt.Errorf("cuda: replaying a recording: %w", err)
	}
	b.opDone("Replay", opSize{}, start, r.launches)
	if b.rec != nil { // replayed inside a recording: its ops join that one
		b.rec.launches += r.launches
	} else {
		b.ops += r.launches
		b.calls++
	}
	if b.syncEach {
		if err := b.dev.sync(); err != nil {
			return fmt.Errorf("cuda: a recording failed on the device (found by the synchronisation after it, TW_CUDA_SYNC=1): %w", err)
		}
	}
	return nil
}

// Free implements engine.Recording. Freeing twice does nothing.
func (r *recording) Free() {
	b := r.b
	if r.exec == nil {
		return
	}
	b.enter()
	defer b.exit()
	C.cudaGraphExecDestroy(r.exec)
	r.exec = nil
	if b.recordings--; b.recordings == 0 {
		b.freeRetired()
	}
}

// freeRetired frees the workspaces outgrown while recordings were alive.
// Called between enter and exit.
func (b *Backend) freeRetired() {
	for _, a := range b.retired {
		b.dev.free(a)
	}
	b.retired = nil
}
