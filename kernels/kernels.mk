# kernels.mk — make targets for the CUDA kernels; the top-level Makefile
# includes it. Needs cmake (≥ 3.20) and g++; the real build also needs nvcc.
#
#   make kernels-emu    build/emu/libtwkernels_emu.a: kernels/*.cu compiled by
#                       g++ against the CPU emulator, with its runtime
#   make kernels-cuda   build/cuda/libtwkernels_cuda.a and build/cuda/ptxas.log
#                       (nvcc: sm_80 + sm_90 code, compute_90 PTX); without
#                       nvcc it says so and succeeds
#   make emu-test       build the emulated library and run the emulator
#                       self-tests (build/emu/emu_selftest)
#
# Each build directory is configured once; later builds re-run cmake by
# themselves when CMakeLists.txt or the set of kernels/*.cu files changes.
# Where ccache is installed, every compile goes through it (CMakeLists.txt,
# TW_CCACHE): a fresh clone's kernels come from the cache when they were
# compiled before, in any checkout (2026-11-29, 2 cores: the emulated
# library 114 s -> 3 s, the real one 99 s -> 10 s, the same bytes).

TW_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
CMAKE ?= cmake
KERNELS_JOBS ?= 2

.PHONY: kernels-emu kernels-cuda emu-test

kernels-emu:
	@test -f $(TW_ROOT)/build/emu/CMakeCache.txt || \
		$(CMAKE) -S $(TW_ROOT) -B $(TW_ROOT)/build/emu -DTW_EMU=ON -DTW_CUDA=OFF >/dev/null
	$(CMAKE) --build $(TW_ROOT)/build/emu -j $(KERNELS_JOBS) --target twkernels_emu

kernels-cuda:
	@if command -v nvcc >/dev/null 2>&1; then \
		{ test -f $(TW_ROOT)/build/cuda/CMakeCache.txt || \
			$(CMAKE) -S $(TW_ROOT) -B $(TW_ROOT)/build/cuda -DTW_EMU=OFF -DTW_CUDA=ON >/dev/null; } && \
		$(CMAKE) --build $(TW_ROOT)/build/cuda -j $(KERNELS_JOBS); \
	else \
		echo "nvcc not found: skipping the real CUDA build"; \
	fi

emu-test: kernels-emu
	$(CMAKE) --build $(TW_ROOT)/build/emu -j $(KERNELS_JOBS)
	cd $(TW_ROOT)/build/emu && ctest --output-on-failure
