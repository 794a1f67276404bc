//go:build cuda || cudaemu

package cuda

// #cgo CFLAGS: -I${SRCDIR}/../../kernels
// #include "kernels.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/turnwise/turnwise/engine"
)

// Options configure a CUDA backend.
type Options struct {
	// Device is the GPU ordinal (under the emulator, one of TW_EMU_DEVICES
	// emulated devices).
	Device int
	// GEMM selects the GEMM implementation: "cublas", cuBLASLt, opened at
	// run time (real GPUs only; where none is found the backend says so in
	// one line on stderr and runs its own); "own" (or its older name
	// "wmma", from when it was built on nvcuda::wmma), turnwise's
	// hand-written tensor-core kernel; or "" for the
	// default, which is cuBLASLt where one is found on a real GPU and the
	// own kernel otherwise (always under the emulator, which has no
	// cuBLASLt).
	GEMM string
	// Attention sets the attention kernels' tile sizes and pipeline depths
	// (the zero value: the kernels' defaults).
	Attention AttentionConfig
	// NoGraphs makes Record refuse, so that callers run every op one by
	// one (for comparing the two, or ruling graphs out); TW_CUDA_GRAPHS=0
	// in the environment does the same for every backend.
	NoGraphs bool
}

// Backend implements engine.Backend with the kernels of kernels/*.cu. It is
// used by one goroutine at a time; backends on different devices may be used
// from different goroutines at once.
//
// With TW_CUDA_SYNC=1 in the environment when it is created, the backend
// waits for the device after every launch, so that a kernel failing on the
// device is reported by the op that launched it.
type Backend struct {
	dev       device
	stream    C.cudaStream_t
	attention AttentionConfig
	syncEach  bool    // TW_CUDA_SYNC=1
	ws        uintptr // workspace shared by launchers that need one, grown on demand
	wsSize    int
	lt        *cublasLt // cuBLASLt state for GEMM "cublas" (cuda tag only), made on first use
	timers    map[*Timer]struct{}

	ops, calls int64      // Launches
	noGraphs   bool       // Options.NoGraphs
	rec        *recording // the recording under way (Record), or nil
	recordings int        // recordings alive
	retired    []uintptr  // workspaces outgrown while recordings were alive

	prof   *opProfile      // the op profile under way (StartOpProfile), or nil
	events []C.cudaEvent_t // the op profiles' events, kept for reuse
}

var _ engine.Backend = (*Backend)(nil)

// New opens the device and returns a backend on a stream of its own.
func New(opt Options) (*Backend, error) {
	_, lt, notice, err := chooseGEMM(opt.GEMM, haveCUBLAS, newCUBLASLt)
	if err != nil {
		return nil, err
	}
	if notice != "" {
		fmt.Fprintln(os.Stderr, notice)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := openDevice(opt.Device)
	if err != nil {
		return nil, err
	}
	return &Backend{
		dev:       dev,
		stream:    C.cudaStream_t(dev.stream()),
		attention: opt.Attention,
		syncEach:  os.Getenv("TW_CUDA_SYNC") == "1",
		lt:        lt,
		timers:    map[*Timer]struct{}{},
		noGraphs:  opt.NoGraphs || os.Getenv("TW_CUDA_GRAPHS") == "0",
	}, nil
}

// chooseGEMM resolves Options.GEMM: the implementation that runs ("own" or
// "cublas") and, for "cublas", the opened library. have says whether this
// build can run cuBLASLt at all (a real GPU), open opens it. Where cuBLASLt
// was asked for, or is the default, but cannot be opened, the own kernel
// runs and notice says why in one line.
func chooseGEMM(requested string, have bool, open func() (*cublasLt, error)) (gemm string, lt *cublasLt, notice string, err error) {
	switch requested {
	case "own", "wmma":
		return "own", nil, "", nil
	case "":
		if !have {
			return "own", nil, "", nil
		}
	case "cublas":
		if !have {
			return "", nil, "", fmt.Errorf("cuda: GEMM %q is only available on a real GPU (built with -tags cuda)", requested)
		}
	default:
		return "", nil, "", fmt.Errorf("cuda: unknown GEMM implementation %q (want cublas or own)", requested)
	}
	lt, err = open()
	if err != nil {
		return "own", nil, fmt.Sprintf("cuda: GEMM cublas: %v; turnwise's own GEMM runs instead (--gemm own chooses it without this notice)", err), nil
	}
	return "cublas", lt, "", nil
}

// Name returns "cuda" or "cudaemu".
func (b *Backend) Name() string { return b.dev.kind() }

// Device returns the device the buffers live on.
func (b *Backend) Device() engine.Device {
	return engine.Device{Kind: b.dev.kind(), Ordinal: b.dev.ordinal()}
}

// Close releases what the backend holds on the device: its timers, cuBLASLt
// handle, plans and workspace, its own workspace, its stream and its
// reference to the device's primary context. Buffers from NewBuffer must be
// freed before. The backend cannot be used afterwards; closing it again does
// nothing.
func (b *Backend) Close() error {
	if b.dev == nil {
		return nil
	}
	b.enter()
	defer b.exit()
	var errs []error
	for t := range b.timers {
		errs = append(errs, t.destroy())
	}
	b.destroyEvents()
	errs = append(errs, b.closeCUBLAS())
	b.freeRetired()
	if b.ws != 0 {
		b.dev.free(b.ws)
		b.ws, b.wsSize = 0, 0
	}
	errs = append(errs, b.dev.close())
	b.dev = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: closing the backend: %w", err)
	}
	return nil
}
