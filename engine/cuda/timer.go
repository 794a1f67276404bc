//go:build cuda || cudaemu

package cuda

// #include <cuda_runtime_api.h>
// #include "kernels.h"
import "C"

import (
	"fmt"
	"time"
)

// Timer measures device time on a backend's stream with a pair of CUDA
// events: Start and Stop record an event each where the stream has got to,
// and Elapsed returns the time the device took from one to the other — the
// work queued in between, without the host's launch overhead as long as the
// queue stays ahead of the device. The resolution is about half a
// microsecond on a GPU. Under the emulator, whose work is done when it is
// queued, the events read the host clock when they are recorded.
//
//	t, err := b.NewTimer()
//	...
//	t.Start()
//	// queue the work
//	t.Stop()
//	d, err := t.Elapsed()
//	t.Close()
//
// A timer is used like its backend: by one goroutine at a time. Start and
// Stop panic if recording fails (as ops do); Backend.Close closes the timers
// still open.
type Timer struct {
	b           *Backend
	start, stop C.cudaEvent_t
}

// NewTimer creates a timer on b's stream.
func (b *Backend) NewTimer() (*Timer, error) {
	b.enter()
	defer b.exit()
	t := &Timer{b: b}
	if err := rtErr("cudaEventCreate", C.cudaEventCreate(&t.start)); err != nil {
		return nil, fmt.Errorf("cuda: creating a timer: %w", err)
	}
	if err := rtErr("cudaEventCreate", C.cudaEventCreate(&t.stop)); err != nil {
		C.cudaEventDestroy(t.start)
		return nil, fmt.Errorf("cuda: creating a timer: %w", err)
	}
	b.timers[t] = struct{}{}
	return t, nil
}

// Start marks where the timed work begins: work queued after it.
func (t *Timer) Start() { t.record("Timer.Start", t.start) }

// Stop marks where the timed work ends: work queued before it.
func (t *Timer) Stop() { t.record("Timer.Stop", t.stop) }

func (t *Timer) record(op string, ev C.cudaEvent_t) {
	if t.start == nil {
		panic("cuda: " + op + " on a closed timer")
	}
	t.b.launch(op, func(s C.cudaStream_t) C.cudaError_t { return C.cudaEventRecord(ev, s) })
}

// Elapsed waits until the device has reached Stop and returns the device
// time from Start to Stop. Both must have been recorded.
func (t *Timer) Elapsed() (time.Duration, error) {
	if t.start == nil {
		return 0, fmt.Errorf("cuda: Timer.Elapsed on a closed timer")
	}
	t.b.enter()
	defer t.b.exit()
	if err := rtErr("cudaEventSynchronize", C.cudaEventSynchronize(t.stop)); err != nil {
		return 0, fmt.Errorf("cuda: timer: %w", err)
	}
	var ms C.float
	if err := rtErr("cudaEventElapsedTime", C.cudaEventElapsedTime(&ms, t.start, t.stop)); err != nil {
		return 0, fmt.Errorf("cuda: timer (Start and Stop both recorded?): %w", err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Hold queues a wait of d on the device (tw_hold) ahead of the work queued
// after it: timed work queued behind it, as long as the host has queued it
// all within d, runs back to back however slowly the host queues it (used
// for calls shorter than the host's time to launch them). Under the
// emulator the wait passes on the host's clock.
func (t *Timer) Hold(d time.Duration) error {
	if t.start == nil {
		return fmt.Errorf("cuda: Timer.Hold on a closed timer")
	}
	t.b.enter()
	defer t.b.exit()
	return rtErr("tw_hold", C.tw_hold(C.int64_t(d.Nanoseconds()), t.b.stream))
}

// Close destroys the timer's events. Closing it again does nothing.
func (t *Timer) Close() error {
	if t.start == nil || t.b.dev == nil {
		return nil
	}
	t.b.enter()
	defer t.b.exit()
	return t.destroy()
}

// destroy releases the events; called between enter and exit.
func (t *Timer) destroy() error {
	err := rtErr("cudaEventDestroy", C.cudaEventDestroy(t.start))
	if e := rtErr("cudaEventDestroy", C.cudaEventDestroy(t.stop)); err == nil {
		err = e
	}
	t.start, t.stop = nil, nil
	delete(t.b.timers, t)
	if err != nil {
		return fmt.Errorf("cuda: closing a timer: %w", err)
	}
	return nil
}
