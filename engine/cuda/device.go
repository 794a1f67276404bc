//go:build cuda || cudaemu

package cuda

// #include <cuda_runtime_api.h>
// #include "kernels.h"
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// device is what differs between a real GPU and the emulator: the context,
// memory, the stream kernels are queued on, and waiting for it. Addresses
// are device addresses held as integers (never dereferenced by Go).
//
// Every method but kind and ordinal must run between Backend.enter and
// Backend.exit: on an OS thread the calling goroutine is locked to, with the
// device's context current (bind).
type device interface {
	kind() string // "cuda" or "cudaemu"
	ordinal() int
	// bind makes the device's context current on the calling OS thread; it
	// costs a cheap query when the context already is.
	bind() error
	alloc(n int) (uintptr, error)
	free(a uintptr)
	memset0(a uintptr, n int) error
	upload(dst uintptr, src []byte) error
	download(dst []byte, src uintptr) error
	copy(dst, src uintptr, n int) error
	stream() unsafe.Pointer // the cudaStream_t launchers receive
	sync() error
	// close destroys the stream and releases the context; nothing may be
	// called afterwards.
	close() error
}

// The CUDA context is per OS thread, and Go moves goroutines between
// threads at any function call. So every op locks its goroutine to the
// thread it is on, makes the backend's context current there, makes its
// launcher and driver calls, and unlocks: binding and launching always
// happen on one thread, whichever it is, and two backends on two devices
// can be used from two goroutines at once. Locking costs nanoseconds;
// binding, a context query when the context is already current.

// enter locks the calling goroutine to its OS thread and makes the backend's
// context current on it. Every use of b.dev is bracketed by enter and exit.
func (b *Backend) enter() {
	if b.dev == nil {
		panic("cuda: backend used after Close")
	}
	runtime.LockOSThread()
	if err := b.dev.bind(); err != nil {
		runtime.UnlockOSThread()
		panic(fmt.Sprintf("cuda: %v", err))
	}
}

// exit undoes enter.
func (b *Backend) exit() { runtime.UnlockOSThread() }

// launch runs one op's launcher call, fn, with the backend's context current
// on the calling thread, and checks its result (check). fn receives the
// stream to launch on.
func (b *Backend) launch(op string, fn func(s C.cudaStream_t) C.cudaError_t) {
	b.launchSized(op, opSize{}, fn)
}

// launchSized is launch for an op whose size a profile records (see
// engine.OpTime's Extents and FLOPs).
func (b *Backend) launchSized(op string, size opSize, fn func(s C.cudaStream_t) C.cudaError_t) {
	b.enter()
	defer b.exit()
	start, ops0 := b.opMark(), b.ops
	before := C.tw_launch_count()
	e := fn(b.stream)
	b.count(int64(C.tw_launch_count() - before))
	b.opDone(op, size, start, b.ops-ops0)
	b.check(op, e)
}

// count adds n launches (kernels, copies, memsets queued on the stream) to
// the backend's count, or to the recording's while one is under way.
func (b *Backend) count(n int64) {
	if b.rec != nil {
		b.rec.launches += n
		return
	}
	b.ops += n
	b.calls += n
}

// Launches implements engine.LaunchCounter. Each cuBLASLt matmul counts as
// one kernel.
func (b *Backend) Launches() (ops, calls int64) { return b.ops, b.calls }

// check turns a launcher's result into a panic naming the op: launch
// failures are kernel or programming errors, not a user's. With
// TW_CUDA_SYNC=1 it also waits for the stream, so that a kernel that fails
// on the device is named by the op that launched it rather than by a later
// synchronisation. Called between enter and exit.
func (b *Backend) check(op string, e C.cudaError_t) {
	if e != C.cudaSuccess {
		clearLastError()
		panic(fmt.Sprintf("cuda: %s: %s (error %d)", op, C.GoString(C.cudaGetErrorString(e)), int(e)))
	}
	if b.syncEach {
		if err := b.dev.sync(); err != nil {
			panic(fmt.Sprintf("cuda: %s failed on the device (found by the synchronisation after it, TW_CUDA_SYNC=1): %v", op, err))
		}
	}
}

// clearLastError resets the calling thread's last runtime error. A failed
// runtime call (a launch, or cudaFuncSetAttribute before one) leaves its
// error there, and launchers read it back after their launches with
// cudaGetLastError: left in place, it would fail the next launch made on
// this thread, by whichever backend.
func clearLastError() { C.cudaGetLastError() }

// rtErr turns a CUDA runtime result into an error naming the call, clearing
// the thread's last error.
func rtErr(call string, e C.cudaError_t) error {
	if e == C.cudaSuccess {
		return nil
	}
	clearLastError()
	return fmt.Errorf("%s: %s (error %d)", call, C.GoString(C.cudaGetErrorString(e)), int(e))
}

// workspace returns a device scratch area of at least n bytes, valid until
// the next call (all work runs in order on one stream, so reuse is safe).
// It grows at least twofold and never shrinks: freeing device memory waits
// for the device, so a loop whose sizes grow reallocates a logarithmic
// number of times and a steady loop never. While recordings are alive, an
// outgrown workspace is kept until the last is freed, since their launches
// point into it. Called between enter and exit.
func (b *Backend) workspace(n int) uintptr {
	if n <= b.wsSize {
		return b.ws
	}
	size := max(n, 2*b.wsSize)
	if b.ws != 0 {
		if b.recordings > 0 {
			b.retired = append(b.retired, b.ws)
		} else {
			b.dev.free(b.ws)
		}
		b.ws, b.wsSize = 0, 0
	}
	a, err := b.dev.alloc(size)
	if err != nil {
		panic(fmt.Sprintf("cuda: allocating a %d-byte workspace: %v", size, err))
	}
	b.ws, b.wsSize = a, size
	return b.ws
}
