// Package cuda is turnwise's GPU backend: the op set of engine.Backend
// implemented by the hand-written kernels of kernels/*.cu, launched through
// the C launchers of kernels/kernels.h.
//
// The package builds under one of two tags, and is empty without either:
//
//   - cuda: the real GPU. Devices, the primary context, memory and streams go
//     through gorgonia.org/cu (CUDA driver API); kernels come from
//     build/cuda/libtwkernels_cuda.a (nvcc: sm_80 and sm_90 code, compute_90
//     PTX), launched through the CUDA runtime, linked statically; GEMMs can
//     also go to cuBLASLt (bf16 in, f32 compute), opened at run time through
//     a thin layer of our own (cublaslt.go), selected by Options.GEMM.
//   - cudaemu: the very same kernels compiled by g++ against the CPU
//     emulator (kernels/emu) into build/emu/libtwkernels_emu.a, with host
//     memory behind the same runtime API. This is how CI, which has no GPU,
//     runs every kernel.
//
// All op code is shared by both tags; only device.go's two variants differ.
// device.go holds the host discipline every op follows: lock the goroutine
// to its OS thread, make the backend's context current, launch, check (and,
// with TW_CUDA_SYNC=1, wait), unlock.
// Build the library first, then test:
//
//	make kernels-emu && go test -tags cudaemu ./engine/cuda/
//	make kernels-cuda && go test -tags cuda ./engine/cuda/    # on a GPU machine
package cuda
