// Package cuda is turnwise's GPU backend: the op set of engine.Backend
// implemented by the hand-written kernels of kernels/*.cu, launched through
// the C launchers of kernels/kernels.h.
//
// The package builds under one of two tags, and is empty without either:
//
//   - cuda: the real GPU. Devices, the primary context, memory and streams go
//     through gorgonia.org/cu (CUDA driver API); kernels come from
//     build/cuda/libtwkernels_cuda.a (nvcc, sm_80 and sm_90); GEMMs can also
//     go to cuBLAS (cublasGemmEx, bf16 in, f32 compute) through a thin cgo
//     layer of our own, selected by Options.GEMM.
//   - cudaemu: the very same kernels compiled by g++ against the CPU
//     emulator (kernels/emu) into build/emu/libtwkernels_emu.a, with host
//     memory behind the same runtime API. This is how CI, which has no GPU,
//     runs every kernel.
//
// All op code is shared by both tags; only device.go's two variants differ.
// Build the library first, then test:
//
//	make kernels-emu && go test -tags cudaemu ./engine/cuda/
//	make kernels-cuda && go test -tags cuda ./engine/cuda/    # on a GPU machine
package cuda
