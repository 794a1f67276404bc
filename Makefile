# turnwise — the README's commands are targets here.
#
#   make run         set up, build, and run the main job (train demo) on its built-in default
#   make test        set up, build, and run every test (what CI runs)
#   make bench       op benchmarks (go test -bench) on the CPU backend
#   make bench-gpu   train bench on a GPU (needs one, and the CUDA toolkit)
#   make gpu-bundle  build/gpu-bundle/: the GPU build and its checks, to carry
#                    to a GPU machine and run there (run.sh OUTDIR); needs nvcc
#   make gpu-bundle-emu  the same bundle over the kernel emulator, in
#                    build/gpu-bundle-emu/ (its run.sh runs anywhere)
#
# Kernel targets (kernels/kernels.mk): kernels-emu, kernels-cuda, emu-test.

GO      ?= go
BIN     := bin/train
# Linking -tags cuda binaries: the toolkit's stub libcuda (Debian's toolkit,
# else NVIDIA's), so that linking needs no driver, or a driver without the
# development symlink; at run time the driver's libcuda.so.1 is loaded.
CUDA_STUBS ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/stubs /usr/local/cuda/lib64/stubs) /usr/lib/x86_64-linux-gnu/stubs)
BUNDLE     := build/gpu-bundle
BUNDLE_EMU := build/gpu-bundle-emu
# Builds that do not depend on where the checkout is: file names in the
# binaries are module paths, and Go's build cache serves every checkout of
# the same sources (without it, a fresh clone recompiles every package of
# the module under each tag set: about four minutes of make test on 2 cores).
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

include kernels/kernels.mk

.PHONY: all setup build run test check-tree vet race bench bench-gpu test-emu test-cuda-build \
	gpu-bundle gpu-bundle-emu test-bundles clean

all: build

setup:
	@./scripts/setup.sh

build: setup
	$(GO) build -o $(BIN) ./cmd/train

# The main job: the SWEET-RL demo on its built-in task family (SFT from
# scratch, rollouts, critic, actor, baselines, a table of held-out success;
# under 15 minutes on 2 cores).
run: build
	./$(BIN) demo --out runs/demo

vet: setup
	$(GO) vet ./...
	$(GO) vet -tags cudaemu ./...
	$(GO) vet -tags cuda ./...

# The race detector's pass and the emulator's reversed-thread pass look for
# what concurrency breaks: they run -short, where the op suite's finite
# differences check a few coordinates each (the plain passes check them all).
race: setup
	$(GO) test -race -short -count=1 ./engine/...

# Every kernel on the CPU emulator: the emulator's self-tests (in thread order
# and reversed), then the op conformance suite through the Go backend.
test-emu: setup emu-test
	$(GO) test -count=1 -tags cudaemu ./engine/cuda/ ./model/... ./bench/...
	$(GO) test -count=1 -tags cudaemu -run 'BackendCUDA|BenchAttentionConfigs' ./cmd/train/
	TW_EMU_REVERSE=1 $(GO) test -short -count=1 -tags cudaemu ./engine/cuda/

# The real CUDA build, where nvcc exists: the kernel library (sm_80 and
# sm_90 code, compute_90 PTX) must compile without a warning; our cuBLASLt
# declarations must agree with the toolkit's headers; every -tags cuda
# package must link (against the driver stub; nothing runs without a GPU);
# the binaries must need nothing from CUDA but the driver: the CUDA
# runtime is linked statically, cuBLASLt and NCCL opened at run time; and
# the machine code must hold what internal/sass's TestKernelCode checks (no
# spill in the default kernels, the attention's fragment loads ahead of use).
test-cuda-build: setup
	@if command -v nvcc >/dev/null 2>&1; then \
		mkdir -p build; \
		$(MAKE) --no-print-directory kernels-cuda >build/cuda-build.log 2>&1 || { cat build/cuda-build.log; exit 1; }; \
		if grep -i 'warning' build/cuda-build.log; then echo "nvcc build has warnings" >&2; exit 1; fi; \
		nvcc -x c -c engine/cuda/testdata/cublaslt_check.c -o /dev/null -Iengine/cuda -Xcompiler -Wall,-Werror || exit 1; \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda ./... && \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda -o build/cuda/train ./cmd/train && \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) test -tags cuda -c -o build/cuda/engine-cuda.test ./engine/cuda/ || exit 1; \
		TW_KERNEL_LIB=$(CURDIR)/build/cuda/libtwkernels_cuda.a $(GO) test -count=1 -run 'KernelCode|Report' ./internal/sass/ || exit 1; \
		for b in build/cuda/train build/cuda/engine-cuda.test; do \
			if ldd $$b | grep -E 'libcudart|libcublas|libnccl'; then echo "$$b: links the CUDA runtime, cuBLAS or NCCL dynamically" >&2; exit 1; fi; \
			ldd $$b | grep -q 'libcuda\.so\.1' || { echo "$$b: does not load libcuda.so.1" >&2; exit 1; }; \
		done; \
		echo "real CUDA build: kernels for sm_80 and sm_90 built, -tags cuda linked, needing only libcuda.so.1 from CUDA"; \
	else \
		echo "nvcc not found: the real CUDA build was skipped (scripts/setup-cuda.sh installs it)"; \
	fi

# No generated file in the repository: a tracked file that .gitignore
# ignores (bytecode, a build output) fails the tests.
check-tree:
	@if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then \
		bad=$$(git ls-files -ci --exclude-standard); \
		if [ -n "$$bad" ]; then echo "tracked files that .gitignore ignores (remove them with git rm --cached):" >&2; echo "$$bad" >&2; exit 1; fi; \
	fi

test: setup vet check-tree
	$(GO) test -count=1 ./...
	$(MAKE) --no-print-directory race
	$(MAKE) --no-print-directory test-emu
	$(MAKE) --no-print-directory test-cuda-build
	$(MAKE) --no-print-directory test-bundles

# The GPU bundle (docs/gpu.md, "The bundle"): the -tags cuda train, the op
# conformance suite and the model's GPU tests as binaries, the shared
# libraries a bare machine lacks, stories260K and run.sh, packed under 56 MiB.
gpu-bundle: setup kernels-cuda
	@command -v nvcc >/dev/null 2>&1 || { echo "gpu-bundle: needs nvcc (scripts/setup-cuda.sh installs it)" >&2; exit 1; }
	GO=$(GO) CUDA_STUBS=$(CUDA_STUBS) ./scripts/gpubundle/build.sh cuda $(BUNDLE)

gpu-bundle-emu: setup kernels-emu
	GO=$(GO) ./scripts/gpubundle/build.sh cudaemu $(BUNDLE_EMU)

# CI: build both bundles (the real one where nvcc exists), run the emulator
# bundle's run.sh end to end, then its self-check (selftest.sh): with a
# panicking and a hung test planted, run.sh must keep the other tests'
# results and what a step printed before Go's timeout or the kill at its
# limit; it also checks the whole run's summary. The end-to-end run leaves
# out the conformance binary's longest tests (most of a second or more each under
# the emulator), TestConformance among them, which test-emu runs in both
# thread orders, and the emulator's bank and
# sector counts, which test-emu runs (this run checks the bundle, not the
# kernels again). It runs while the GPU bundle builds (together they take
# about 160 s of a 2-core machine, one after the other about 180), its output
# printed when both are done.
BUNDLE_EMU_SKIP := ^Test(Conformance|AttentionConfigs|AttentionBackwardConfigs|SampleChunks|SampleMatchesCPU|AttentionBackwardDeterministic|EmbeddingBackwardExact|GemmSkinny|GemmPaths|GemmSplitKExact|SharedMemoryBanks|GlobalAccesses)$$
test-bundles: setup
	$(MAKE) --no-print-directory gpu-bundle-emu
	rm -rf build/gpu-bundle-emu-out
	TW_BUNDLE_SKIP_TESTS='$(BUNDLE_EMU_SKIP)' $(BUNDLE_EMU)/run.sh build/gpu-bundle-emu-out >build/gpu-bundle-emu-run.log 2>&1 & run=$$!; \
	if command -v nvcc >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory gpu-bundle; \
	else \
		echo "nvcc not found: the GPU bundle was not built (scripts/setup-cuda.sh installs it)"; \
	fi; rc=$$?; \
	wait $$run; rrc=$$?; \
	echo "$(BUNDLE_EMU)/run.sh build/gpu-bundle-emu-out"; cat build/gpu-bundle-emu-run.log; \
	test $$rc -eq 0 -a $$rrc -eq 0
	./scripts/gpubundle/selftest.sh $(BUNDLE_EMU) build/gpu-bundle-emu-out

bench: setup
	$(GO) test -run '^$$' -bench . ./engine/cpu/

# Renders the 1000 ColBench frontend test ground truths in chromium with 1, 2
# and 4 tabs (docs/colbench.md, "Frontend pages: rendering offline"); needs ../shared.
bench-render: setup
	nice -n 10 $(GO) test -run '^$$' -bench GroundTruths -benchtime=1x -timeout 60m ./sweetrl/frontend/render/

# train bench on a GPU: every kernel at Llama-3.1-8B's shapes beside cuBLASLt
# and the ceilings, the 8B LoRA step and generation; build/bench-gpu.{json,md}.
bench-gpu: kernels-cuda
	mkdir -p build
	CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda -o build/train-cuda ./cmd/train
	./build/train-cuda bench --backend cuda --out build/bench-gpu.json --md build/bench-gpu.md

clean:
	rm -rf bin build runs
