//go:build cuda || cudaemu

package cuda

// GEMM "cublas": cuBLASLt (cublasLtMatmul: bf16, f16 or f32 operands, f32
// compute and scale, f32 or bf16/f16 C, strided-batched, the heuristic's
// first algorithm, a workspace), the peer the hand-written GEMM is measured
// against. Nothing links against cuBLAS: the library is opened at run time
// (cublaslt.h), so the binary runs with any cuBLASLt ≥ 11 the machine has —
// a CUDA toolkit's, or the one inside PyTorch's pip wheels — or with none,
// falling back to the hand-written GEMM after a one-line notice. cuBLAS
// proper (libcublas) is not needed: cuBLASLt does every GEMM we ask for.
//
// Where it looks (the first library that opens and exports every entry
// point wins): TW_CUBLAS_PATH (a colon-separated list of directories or
// library files), then libcublasLt.so.N, newest N first, through the dynamic
// loader and in the CUDA toolkits and Python wheels (runtimeLib, shared with
// NCCL, says where).
//
// The shapes of a run are few, so each gets a plan (descriptors, layouts and
// the chosen algorithm), made on first use and kept until Close.

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include <cuda_runtime_api.h>
// #include "cublaslt.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// ltWorkspaceBytes is cuBLASLt's workspace: what NVIDIA recommends for
// Hopper (32 MiB), which also covers older GPUs' needs.
const ltWorkspaceBytes = 32 << 20

// ltLibrary is an opened cuBLASLt.
type ltLibrary struct {
	api     C.tw_lt_api
	path    string // as opened: a file, or a soname the dynamic loader found
	version int    // cublasLtGetVersion: major·10000 + minor·100 + patch
}

// cublasLt is a backend's cuBLASLt state.
type cublasLt struct {
	lib    *ltLibrary
	handle C.tw_lt_handle // made on first use, with the backend's context current
	ws     uintptr        // [ltWorkspaceBytes] bytes
	plans  map[ltKey]*C.tw_lt_plan
	noAlgo bool // a shape had no algorithm (said once on stderr)
}

// ltKey identifies a plan: everything cuBLASLt's choice depends on.
type ltKey struct {
	m, n, k, batch         int
	lda, ldb               int
	strideA, strideB       int
	transA, transB         bool
	ab, c                  engine.DType
	alignA, alignB, alignC int
}

// cublasLtLib is where cuBLASLt is looked for (runtimeLib): TW_CUBLAS_PATH,
// then versions 13, 12 and 11 and any newer found.
var cublasLtLib = newRuntimeLib("libcublasLt.so", "TW_CUBLAS_PATH", 11, 13, 12, 11)

// cublasLtCandidates lists, in the order to try them, the cuBLASLt files and
// sonames to open (runtimeLib.candidates).
func cublasLtCandidates(getenv func(string) string, roots []string) []string {
	return cublasLtLib.candidates(getenv, roots)
}

// openCUBLASLt opens the first candidate that is a cuBLASLt ≥ 11 exporting
// every entry point we call. The error lists why each candidate that exists
// was refused.
func openCUBLASLt(candidates []string) (*ltLibrary, error) {
	var why []string
	for _, c := range candidates {
		lib := &ltLibrary{path: c}
		var msg [512]C.char
		cs := C.CString(c)
		rc := C.tw_lt_open(cs, &lib.api, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(cs))
		if rc != 0 {
			if strings.Contains(c, "/") { // a file that exists but would not open; sonames not found say nothing
				why = append(why, C.GoString(&msg[0]))
			}
			continue
		}
		lib.version = int(C.tw_lt_version(&lib.api))
		if lib.version < 110000 {
			why = append(why, fmt.Sprintf("%s: version %d, want ≥ 11", c, lib.version))
			continue
		}
		return lib, nil
	}
	if len(why) == 0 {
		return nil, errors.New("no libcublasLt.so.N (N ≥ 11) found; TW_CUBLAS_PATH names the directory to search")
	}
	return nil, fmt.Errorf("no usable cuBLASLt: %s", strings.Join(why, "; "))
}

// newCUBLASLt opens cuBLASLt for a backend.
func newCUBLASLt() (*cublasLt, error) {
	lib, err := openCUBLASLt(cublasLtCandidates(os.Getenv, []string{"/"}))
	if err != nil {
		return nil, err
	}
	return &cublasLt{lib: lib, plans: map[ltKey]*C.tw_lt_plan{}}, nil
}

// GEMMName says which GEMM the backend runs: "own" (turnwise's kernel), or
// "cublaslt" with the library's version and where it was found.
func (b *Backend) GEMMName() string {
	if b.lt == nil {
		return "own"
	}
	v := b.lt.lib.version
	return fmt.Sprintf("cublaslt %d.%d.%d (%s)", v/10000, v/100%100, v%100, b.lt.lib.path)
}

// alignment returns the largest power of two, up to 256, dividing a.
func alignment(a uintptr) int {
	n := 1
	for n < 256 && a%uintptr(2*n) == 0 {
		n *= 2
	}
	return n
}

func ltType(d engine.DType) C.int {
	switch d {
	case engine.F32:
		return C.TW_CUDA_R_32F
	case engine.BF16:
		return C.TW_CUDA_R_16BF
	case engine.F16:
		return C.TW_CUDA_R_16F
	}
	panic(fmt.Sprintf("cuda: no cuBLASLt type for %v", d))
}

// newPlan makes the descriptors of key's GEMM and asks the heuristic for an
// algorithm; found reports whether it had one.
func (lib *ltLibrary) newPlan(h C.tw_lt_handle, k ltKey) (p *C.tw_lt_plan, found bool, err error) {
	p = new(C.tw_lt_plan)
	st := C.tw_lt_plan_make(&lib.api, h, p, cbool(k.transA), cbool(k.transB), i64(k.m), i64(k.n), i64(k.k), i64(k.lda),
		i64(k.strideA), i64(k.ldb), i64(k.strideB), i64(k.batch), ltType(k.ab), ltType(k.c), C.uint32_t(k.alignA),
		C.uint32_t(k.alignB), C.uint32_t(k.alignC), ltWorkspaceBytes)
	if st != 0 {
		return nil, false, fmt.Errorf("status %d", int(st))
	}
	return p, p.found > 0, nil
}

// destroyPlan releases what newPlan made.
func (lib *ltLibrary) destroyPlan(p *C.tw_lt_plan) { C.tw_lt_plan_destroy(&lib.api, p) }

// cublasGemm runs the GEMM through cuBLASLt and reports true, or reports
// false when cuBLASLt has no algorithm for it (the caller then runs its own).
func (b *Backend) cublasGemm(c, a, bm *engine.Tensor, p engine.GemmParams, g engine.GemmDims) bool {
	if g.K == 0 { // C = β·C: nothing for cuBLASLt to multiply
		return false
	}
	lt := b.lt
	key := ltKey{m: g.M, n: g.N, k: g.K, batch: g.Batch, lda: g.LDA, ldb: g.LDB, strideA: g.StrideA,
		strideB: g.StrideB, transA: p.TransA, transB: p.TransB, ab: a.DType(), c: c.DType(),
		alignA: alignment(addr(a)), alignB: alignment(addr(bm)), alignC: alignment(addr(c))}
	ran := false
	b.launchSized("Gemm (cuBLASLt)", b.gemmSize(g, c, a, p.Beta), func(s C.cudaStream_t) C.cudaError_t {
		if lt.handle == nil {
			if st := C.tw_lt_create(&lt.lib.api, &lt.handle); st != 0 {
				panic(fmt.Sprintf("cuda: cublasLtCreate: status %d", int(st)))
			}
			ws, err := b.dev.alloc(ltWorkspaceBytes)
			if err != nil {
				panic(fmt.Sprintf("cuda: allocating cuBLASLt's %d-byte workspace: %v", ltWorkspaceBytes, err))
			}
			lt.ws = ws
		}
		plan := lt.plans[key]
		if plan == nil {
			var err error
			if plan, _, err = lt.lib.newPlan(lt.handle, key); err != nil {
				panic(fmt.Sprintf("cuda: planning a cuBLASLt GEMM (C %v, A %v, B %v): %v", c, a, bm, err))
			}
			lt.plans[key] = plan
		}
		if plan.found == 0 {
			if !lt.noAlgo {
				lt.noAlgo = true
				fmt.Fprintf(os.Stderr, "cuda: cuBLASLt has no algorithm for GEMM C %v = A %v · B %v (transA=%v, transB=%v); "+
					"turnwise's own kernel runs such shapes\n", c, a, bm, p.TransA, p.TransB)
			}
			return C.cudaSuccess
		}
		st := C.tw_lt_matmul(&lt.lib.api, lt.handle, plan, C.float(p.Alpha), C.uintptr_t(addr(a)), C.uintptr_t(addr(bm)),
			C.float(p.Beta), C.uintptr_t(addr(c)), C.uintptr_t(lt.ws), ltWorkspaceBytes, unsafe.Pointer(s))
		if st != 0 {
			panic(fmt.Sprintf("cuda: cublasLtMatmul (C %v, A %v, B %v): status %d", c, a, bm, int(st)))
		}
		ran = true
		b.count(1)
		return C.cudaSuccess
	})
	return ran
}

// closeCUBLAS releases the backend's cuBLASLt plans, workspace and handle.
// Called between enter and exit.
func (b *Backend) closeCUBLAS() error {
	lt := b.lt
	if lt == nil {
		return nil
	}
	for _, p := range lt.plans {
		lt.lib.destroyPlan(p)
	}
	lt.plans = nil
	if lt.ws != 0 {
		b.dev.free(lt.ws)
		lt.ws = 0
	}
	var err error
	if lt.handle != nil {
		if st := C.tw_lt_destroy(&lt.lib.api, lt.handle); st != 0 {
			err = fmt.Errorf("cublasLtDestroy: status %d", int(st))
		}
		lt.handle = nil
	}
	b.lt = nil
	return err
}
