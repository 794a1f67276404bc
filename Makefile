# turnwise — the README's commands are targets here.
#
#   make run         set up, build, and run the main job (train demo) on its built-in default
#   make test        set up, build, and run every test (what CI runs)
#   make bench       op benchmarks (go test -bench) on the CPU backend
#   make bench-gpu   op benchmarks on a GPU (needs one, and the CUDA toolkit)
#
# Kernel targets (kernels/kernels.mk): kernels-emu, kernels-cuda, emu-test.

GO      ?= go
BIN     := bin/train
# Linking -tags cuda binaries without a GPU driver: the toolkit's stub libcuda.
CUDA_STUBS ?= /usr/lib/x86_64-linux-gnu/stubs

include kernels/kernels.mk

.PHONY: all setup build run test vet race bench bench-gpu test-emu test-cuda-build clean

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

race: setup
	$(GO) test -race -count=1 ./engine/...

# Every kernel on the CPU emulator: the emulator's self-tests (in thread order
# and reversed), then the op conformance suite through the Go backend.
test-emu: setup emu-test
	$(GO) test -count=1 -tags cudaemu ./engine/cuda/ ./model/...
	$(GO) test -count=1 -tags cudaemu -run BackendCUDA ./cmd/train/
	TW_EMU_REVERSE=1 $(GO) test -count=1 -tags cudaemu ./engine/cuda/

# The real CUDA build, where nvcc exists: the kernel library (sm_80 and
# sm_90 code, compute_90 PTX) must compile without a warning; our cuBLASLt
# declarations must agree with the toolkit's headers; every -tags cuda
# package must link (against the driver stub; nothing runs without a GPU);
# and the binaries must need nothing from CUDA but the driver: the CUDA
# runtime is linked statically and cuBLASLt opened at run time.
test-cuda-build: setup
	@if command -v nvcc >/dev/null 2>&1; then \
		mkdir -p build; \
		$(MAKE) --no-print-directory kernels-cuda >build/cuda-build.log 2>&1 || { cat build/cuda-build.log; exit 1; }; \
		if grep -i 'warning' build/cuda-build.log; then echo "nvcc build has warnings" >&2; exit 1; fi; \
		nvcc -x c -c engine/cuda/testdata/cublaslt_check.c -o /dev/null -Iengine/cuda -Xcompiler -Wall,-Werror || exit 1; \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda ./... && \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda -o build/cuda/train ./cmd/train && \
		CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) test -tags cuda -c -o build/cuda/engine-cuda.test ./engine/cuda/ || exit 1; \
		for b in build/cuda/train build/cuda/engine-cuda.test; do \
			if ldd $$b | grep -E 'libcudart|libcublas'; then echo "$$b: links the CUDA runtime or cuBLAS dynamically" >&2; exit 1; fi; \
			ldd $$b | grep -q 'libcuda\.so\.1' || { echo "$$b: does not load libcuda.so.1" >&2; exit 1; }; \
		done; \
		echo "real CUDA build: kernels for sm_80 and sm_90 built, -tags cuda linked, needing only libcuda.so.1 from CUDA"; \
	else \
		echo "nvcc not found: the real CUDA build was skipped (scripts/setup-cuda.sh installs it)"; \
	fi

test: setup vet
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./engine/...
	$(MAKE) --no-print-directory test-emu
	$(MAKE) --no-print-directory test-cuda-build

bench: setup
	$(GO) test -run '^$$' -bench . ./engine/cpu/

bench-gpu: setup kernels-cuda
	$(GO) test -tags cuda -run '^$$' -bench . ./engine/cuda/

clean:
	rm -rf bin build runs
