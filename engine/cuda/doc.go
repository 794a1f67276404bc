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
//     runs every kernel. The emulated code keeps two of a GPU's rules that
//     x86 code would not: a misaligned load or store ends the process with
//     the kernel's file:line (UBSan's alignment check, hence -lubsan), and
//     a*b+c may be contracted into an FMA as nvcc contracts it.
//
// All op code is shared by both tags; only device.go's two variants
// (device_cuda.go, device_emu.go) differ. The package holds, by file:
//
//	backend.go   Backend and Options: construction, Name, Device, Close
//	buffer.go    device memory (NewBuffer, FreeBuffer, Upload, Download,
//	             Sync) and the conversions of tensors to launcher arguments
//	device.go    the host discipline every op follows: lock the goroutine
//	             to its OS thread, make the backend's context current,
//	             launch, check (and, with TW_CUDA_SYNC=1, wait), unlock;
//	             and the shared workspace (bind.h: making a context current)
//	X.go         the ops of family X, launching the kernels of kernels/X.cu:
//	             elementwise, gemm, embedding, rmsnorm, layernorm, bias,
//	             rope, attention, swiglu, gelu, logsoftmax, sumsquares,
//	             adamw, sample
//	cublaslt.go  GEMM "cublas": cuBLASLt opened at run time (real GPUs),
//	             declared in cublaslt.h
//	nccl.go      NCCL opened at run time, declared in nccl.h; both
//	             libraries' entry points are looked up by dlopen.h
//	timer.go     Timer: device time between two points of the stream
//
// Build the library first, then test:
//
//	make kernels-emu && go test -tags cudaemu ./engine/cuda/
//	make kernels-cuda && go test -tags cuda ./engine/cuda/    # on a GPU machine
package cuda
