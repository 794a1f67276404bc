package engine

import "errors"

// Recorder is implemented by a backend that can record the ops a function
// issues and replay them later as one unit — on a GPU, a CUDA graph, which
// the driver launches at once instead of kernel by kernel. A step repeated
// with new inputs (decoding a token) is recorded once, with its inputs in
// device buffers that the host rewrites before each replay.
type Recorder interface {
	// Record calls fn and returns the ops fn issued, recorded and not run.
	// fn may only issue ops on tensors that outlive the recording: no
	// Upload, Download, Sync or allocation (the recording fails), and
	// nothing that depends on a value computed by the recorded ops. The
	// ops' extents, pointers and scalar arguments are fixed when recorded;
	// only the contents of the tensors they read change between replays.
	// On an error nothing was recorded or run, and the backend is as
	// before.
	Record(fn func()) (Recording, error)
}

// Recording is a sequence of recorded ops.
type Recording interface {
	// Replay queues the recorded ops again, in their order, on the
	// tensors they were recorded with, reading what those hold when they
	// run.
	Replay() error
	// Free releases the recording.
	Free()
}

// ErrNoRecorder is Record's error on a backend that cannot record.
var ErrNoRecorder = errors.New("the backend cannot record ops")

// Record records fn on b (Recorder.Record), or returns ErrNoRecorder when b
// cannot record.
func Record(b Backend, fn func()) (Recording, error) {
	r, ok := b.(Recorder)
	if !ok {
		return nil, ErrNoRecorder
	}
	return r.Record(fn)
}

// LaunchCounter is implemented by a backend that queues work on a device.
// Launches returns the number of kernels, device-to-device copies and
// memsets it has queued so far (ops: a replayed recording counts all it
// holds) and the number of calls that queued them (calls: a replayed
// recording is one) — what a GPU pays a fixed cost per op for, and what the
// host pays one for.
type LaunchCounter interface {
	Launches() (ops, calls int64)
}

// Launches returns b's counts (LaunchCounter) and whether b counts.
func Launches(b Backend) (ops, calls int64, ok bool) {
	c, ok := b.(LaunchCounter)
	if !ok {
		return 0, 0, false
	}
	ops, calls = c.Launches()
	return ops, calls, true
}
