//go:build cuda || cudaemu

package cuda

// NCCL: engine.Communicator for GPU ranks, one process (and one backend) per
// GPU. Nothing links against NCCL: libnccl.so.2 is opened at run time
// (nccl.h declares what we call), so the binary runs with the NCCL a machine
// has — PyTorch's wheels carry one (site-packages/nvidia/nccl/lib) — and
// says clearly when there is none. Where it looks: TW_NCCL_PATH (a
// colon-separated list of directories or library files), then
// libnccl.so.2 through the dynamic loader, the CUDA toolkits and the Python
// wheels (runtimeLib, shared with cuBLASLt).
//
// Rank 0 makes NCCL's unique id and publishes it in the job's store; every
// rank reads it and joins (ncclCommInitRank). Collectives are queued on the
// backend's stream, ordered after the ops already there.
//
// The kernel emulator has no NCCL of its own; under -tags cudaemu a library
// named by TW_NCCL_PATH is opened all the same (the tests build a one-rank
// stand-in that copies host memory), so that the code above the library is
// exercised without a GPU.

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "nccl.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// ncclLib is where NCCL is looked for (runtimeLib): TW_NCCL_PATH, then
// libnccl.so.2.
var ncclLib = newRuntimeLib("libnccl.so", "TW_NCCL_PATH", 2, 2)

// ncclLibrary is an opened NCCL.
type ncclLibrary struct {
	api     C.tw_nccl_api
	path    string // as opened: a file, or a soname the dynamic loader found
	version int    // ncclGetVersion: major·10000 + minor·100 + patch
}

// openNCCL opens the first candidate that is an NCCL ≥ 2.10 exporting every
// entry point we call. The error lists why each candidate that exists was
// refused.
func openNCCL(candidates []string) (*ncclLibrary, error) {
	var why []string
	for _, c := range candidates {
		lib := &ncclLibrary{path: c}
		var msg [512]C.char
		cs := C.CString(c)
		rc := C.tw_nccl_open(cs, &lib.api, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(cs))
		if rc != 0 {
			if strings.Contains(c, "/") { // a file that exists but would not open; sonames not found say nothing
				why = append(why, C.GoString(&msg[0]))
			}
			continue
		}
		var v C.int
		if st := C.tw_nccl_version(&lib.api, &v); st != 0 {
			why = append(why, fmt.Sprintf("%s: ncclGetVersion: %s", c, lib.errString(st)))
			continue
		}
		lib.version = int(v)
		if lib.version < C.TW_NCCL_MIN_VERSION {
			why = append(why, fmt.Sprintf("%s: version %s, want ≥ 2.10 (bf16)", c, lib.versionString()))
			continue
		}
		return lib, nil
	}
	if len(why) == 0 {
		return nil, errors.New("no NCCL (libnccl.so.2) found: TW_NCCL_PATH names the directory to search " +
			"(PyTorch's wheels carry one, in site-packages/nvidia/nccl/lib)")
	}
	return nil, fmt.Errorf("no usable NCCL: %s", strings.Join(why, "; "))
}

func (lib *ncclLibrary) versionString() string {
	v := lib.version
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

func (lib *ncclLibrary) errString(st C.tw_nccl_result) string {
	return fmt.Sprintf("%s (ncclResult %d)", C.GoString(C.tw_nccl_error_string(&lib.api, st)), int(st))
}

// NCCL is an NCCL communicator over one backend's device: it implements
// engine.Communicator for tensors of that backend.
type NCCL struct {
	b          *Backend
	lib        *ncclLibrary
	comm       C.tw_nccl_comm
	rank, size int
	scratch    *engine.Tensor // [1] f32, Barrier's all-reduce
}

var _ engine.Communicator = (*NCCL)(nil)

// NewNCCL opens NCCL and joins rank of size ranks on b's device. Every rank
// of the job calls it with the same store; rank 0 publishes NCCL's unique id
// there under key, and the others wait up to timeout for it.
func NewNCCL(b *Backend, store engine.Store, rank, size int, key string, timeout time.Duration) (*NCCL, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d of %d", rank, size)
	}
	lib, err := openNCCL(ncclLib.candidates(os.Getenv, []string{"/"}))
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	var id C.tw_nccl_id
	idBytes := unsafe.Slice((*byte)(unsafe.Pointer(&id)), unsafe.Sizeof(id))
	if rank == 0 {
		if st := C.tw_nccl_unique_id(&lib.api, &id); st != 0 {
			return nil, fmt.Errorf("nccl: ncclGetUniqueId: %s", lib.errString(st))
		}
		if err := store.Set(key, idBytes); err != nil {
			return nil, fmt.Errorf("nccl: publishing the unique id: %w", err)
		}
	} else {
		v, err := store.Get(key, timeout)
		if err != nil {
			return nil, fmt.Errorf("nccl: rank %d waiting for rank 0's unique id: %w", rank, err)
		}
		if len(v) != len(idBytes) {
			return nil, fmt.Errorf("nccl: the unique id in the store has %d bytes, want %d", len(v), len(idBytes))
		}
		copy(idBytes, v)
	}
	c := &NCCL{b: b, lib: lib, rank: rank, size: size}
	b.enter()
	st := C.tw_nccl_init(&lib.api, &c.comm, C.int(size), &id, C.int(rank))
	b.exit()
	if st != 0 {
		return nil, fmt.Errorf("nccl: ncclCommInitRank (rank %d of %d, %s): %s", rank, size, b.Device(), lib.errString(st))
	}
	if c.scratch, err = engine.Alloc(b, engine.F32, 1); err != nil {
		c.Close()
		return nil, fmt.Errorf("nccl: %w", err)
	}
	return c, nil
}

// Library says which NCCL runs: its version and where it was found.
func (c *NCCL) Library() string {
	return fmt.Sprintf("NCCL %s (%s)", c.lib.versionString(), c.lib.path)
}

// Rank is this process's rank.
func (c *NCCL) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *NCCL) Size() int { return c.size }

// call runs one NCCL call with the backend's context current and turns its
// result into an error naming the collective.
func (c *NCCL) call(op string, fn func(s unsafe.Pointer) C.tw_nccl_result) error {
	c.b.enter()
	defer c.b.exit()
	if st := fn(unsafe.Pointer(c.b.stream)); st != 0 {
		return fmt.Errorf("nccl: %s on rank %d of %d: %s", op, c.rank, c.size, c.lib.errString(st))
	}
	return nil
}

func ncclSumType(op string, t *engine.Tensor) C.int {
	switch t.DType() {
	case engine.F32:
		return C.TW_NCCL_FLOAT32
	case engine.BF16:
		return C.TW_NCCL_BFLOAT16
	}
	panic(fmt.Sprintf("nccl: %s of %v: want f32 or bf16", op, t))
}

func uptr(t *engine.Tensor) C.uintptr_t { return C.uintptr_t(addr(t)) }

// AllReduce sums x across the ranks in place (engine.Communicator).
func (c *NCCL) AllReduce(x *engine.Tensor) error {
	dt := ncclSumType("AllReduce", x)
	if x.Numel() == 0 {
		return nil
	}
	return c.call("AllReduce", func(s unsafe.Pointer) C.tw_nccl_result {
		return C.tw_nccl_allreduce(&c.lib.api, uptr(x), uptr(x), C.size_t(x.Numel()), dt, c.comm, s)
	})
}

// ReduceScatter leaves this rank's block of the sum of in in out
// (engine.Communicator).
func (c *NCCL) ReduceScatter(out, in *engine.Tensor) error {
	dt := ncclSumType("ReduceScatter", out)
	if in.DType() != out.DType() || in.Numel() != c.size*out.Numel() {
		panic(fmt.Sprintf("nccl: ReduceScatter out %v, in %v: want in of out's dtype and %d× its elements", out, in, c.size))
	}
	if out.Numel() == 0 {
		return nil
	}
	return c.call("ReduceScatter", func(s unsafe.Pointer) C.tw_nccl_result {
		return C.tw_nccl_reduce_scatter(&c.lib.api, uptr(in), uptr(out), C.size_t(out.Numel()), dt, c.comm, s)
	})
}

// AllGather concatenates every rank's in into out (engine.Communicator).
func (c *NCCL) AllGather(out, in *engine.Tensor) error {
	if in.DType() != out.DType() || out.Numel() != c.size*in.Numel() {
		panic(fmt.Sprintf("nccl: AllGather out %v, in %v: want out of in's dtype and %d× its elements", out, in, c.size))
	}
	if in.Numel() == 0 {
		return nil
	}
	return c.call("AllGather", func(s unsafe.Pointer) C.tw_nccl_result {
		return C.tw_nccl_allgather(&c.lib.api, uptr(in), uptr(out), C.size_t(in.Bytes()), c.comm, s)
	})
}

// Broadcast overwrites x with root's x (engine.Communicator).
func (c *NCCL) Broadcast(x *engine.Tensor, root int) error {
	if root < 0 || root >= c.size {
		panic(fmt.Sprintf("nccl: Broadcast from root %d of %d ranks", root, c.size))
	}
	if x.Numel() == 0 {
		return nil
	}
	return c.call("Broadcast", func(s unsafe.Pointer) C.tw_nccl_result {
		return C.tw_nccl_broadcast(&c.lib.api, uptr(x), C.size_t(x.Bytes()), C.int(root), c.comm, s)
	})
}

// Barrier all-reduces one value and waits for the stream: it returns once
// every rank's work queued before it is done (engine.Communicator). It also
// reports an error NCCL met asynchronously.
func (c *NCCL) Barrier() error {
	if err := c.AllReduce(c.scratch); err != nil {
		return err
	}
	if err := c.b.Sync(); err != nil {
		return fmt.Errorf("nccl: Barrier on rank %d of %d: %w", c.rank, c.size, err)
	}
	return c.call("Barrier", func(unsafe.Pointer) C.tw_nccl_result {
		var async C.tw_nccl_result
		if st := C.tw_nccl_async_error(&c.lib.api, c.comm, &async); st != 0 {
			return st
		}
		return async
	})
}

// Close destroys the communicator (after its work completes) and frees its
// scratch buffer.
func (c *NCCL) Close() error {
	if c.comm == nil {
		return nil
	}
	if c.scratch != nil {
		c.b.FreeBuffer(c.scratch.Buffer())
		c.scratch = nil
	}
	err := c.call("ncclCommDestroy", func(unsafe.Pointer) C.tw_nccl_result { return C.tw_nccl_destroy(&c.lib.api, c.comm) })
	c.comm = nil
	return err
}
