// test_diagnostics.cu — kernel bugs the emulator must report instead of
// hanging or passing silently. Each CHILD runs a buggy kernel in a child
// process; its TEST checks that the child aborted with a message naming the
// bug, the kernel and the call site. The reverse-order test shows a missing
// barrier that forward order hides. The kernels compile with nvcc too; the
// tests run only under the emulator.
#include <string>

#include "../../common.cuh"
#include "harness.h"

static const std::string kFile = "test_diagnostics.cu:";

// ---- A barrier that some threads never reach ----------------------------------

static const int kReturnLine = __LINE__ + 3;
__global__ void early_return(float *x, int n) {
	if ((int)threadIdx.x >= n) return; // the bug: these threads skip the barrier below
	__syncthreads();
	x[threadIdx.x] += 1.0f;
}

EMU_CHILD(early_return) {
	DeviceBuf<float> x(64);
	LAUNCH(1, 64, 0, 0, early_return)(x.p, 40);
}

EMU_TEST(diag_early_return) {
	CHECK(expect_abort("early_return", {},
	                   {"kernel \"early_return\"", "threads 0-39: wait at __syncthreads() ",
	                    kFile + std::to_string(kReturnLine), "threads 40-63: have returned"}));
}

// ---- Threads at different barriers ------------------------------------------------

static const int kBranchLine = __LINE__ + 4;
__global__ void branch_barriers(float *x) {
	__shared__ float s[64];
	if (threadIdx.x < 32) {
		__syncthreads();
		s[threadIdx.x] = 1.0f;
	} else {
		s[threadIdx.x] = 2.0f;
		__syncthreads();
	}
	x[threadIdx.x] = s[63 - threadIdx.x];
}

EMU_CHILD(branch_barriers) {
	DeviceBuf<float> x(64);
	LAUNCH(1, 64, 0, 0, branch_barriers)(x.p);
}

EMU_TEST(diag_divergent_barriers) {
	CHECK(expect_abort("branch_barriers", {},
	                   {"divergent __syncthreads", "kernel \"branch_barriers\"",
	                    "threads 0-31: wait at __syncthreads() ", kFile + std::to_string(kBranchLine),
	                    "threads 32-63: wait at __syncthreads() ", kFile + std::to_string(kBranchLine + 4)}));
}

// ---- Warp masks -------------------------------------------------------------------

__global__ void mask_mismatch(int *x) {
	const int lane = threadIdx.x % 32;
	const unsigned mask = lane == 5 ? 0x7fffffffu : 0xffffffffu; // the bug: lane 5 leaves out lane 31
	x[threadIdx.x] = __shfl_sync(mask, lane, 0);
}

EMU_CHILD(mask_mismatch) {
	DeviceBuf<int> x(32);
	LAUNCH(1, 32, 0, 0, mask_mismatch)(x.p);
}

EMU_TEST(diag_mask_mismatch) {
	CHECK(expect_abort("mask_mismatch", {},
	                   {"kernel \"mask_mismatch\"", "threads 0-4: wait at __shfl_sync(mask 0xffffffff)",
	                    "thread 5: wait at __shfl_sync(mask 0x7fffffff)", kFile}));
}

static const int kShortWarpLine = __LINE__ + 3;
__global__ void short_warp(float *x) {
	float v = x[threadIdx.x];
	v += __shfl_xor_sync(0xffffffffu, v, 16); // the bug: the block has 24 threads
	x[threadIdx.x] = v;
}

EMU_CHILD(short_warp) {
	DeviceBuf<float> x(24);
	LAUNCH(1, 24, 0, 0, short_warp)(x.p);
}

EMU_TEST(diag_mask_names_missing_lanes) {
	CHECK(expect_abort("short_warp", {},
	                   {"__shfl_xor_sync(mask 0xffffffff)", kFile + std::to_string(kShortWarpLine),
	                    "names lanes this warp does not have (it has 24 threads"}));
}

// ---- Stack overflow and bad addresses ----------------------------------------------

__device__ __noinline__ int deep(int n) {
	volatile int frame[256]; // 1 KiB a call: 200 calls overflow a 64 KiB fiber stack
	frame[n % 256] = n;
	return n == 0 ? 0 : deep(n - 1) + frame[n % 256];
}

__global__ void recurse(int *out, int n) { out[threadIdx.x] = deep(n); }

EMU_CHILD(stack_overflow) {
	DeviceBuf<int> out(32);
	LAUNCH(2, 32, 0, 0, recurse)(out.p, 200);
}

EMU_TEST(diag_stack_overflow) {
	// Forward order, so that thread 0 is the first to overflow.
	CHECK(expect_abort("stack_overflow", {"TW_EMU_REVERSE=0"},
	                   {"stack overflow in kernel \"recurse\"", "thread 0 (0,0,0)", "TW_EMU_STACK_KB"}));
}

__global__ void bad_pointer(int *p) { p[threadIdx.x * 1024] = 1; }

EMU_CHILD(bad_pointer) { LAUNCH(1, 32, 0, 0, bad_pointer)((int *)16); }

EMU_TEST(diag_invalid_address) {
	CHECK(expect_abort("bad_pointer", {"TW_EMU_REVERSE=0"},
	                   {"invalid memory access (SIGSEGV at address 0x10) in kernel \"bad_pointer\"", "thread 0 (0,0,0)"}));
}

// ---- Watchdog -------------------------------------------------------------------

__global__ void spin(volatile int *flag) {
	while (*flag == 0) { // the bug: nobody sets the flag
	}
}

EMU_CHILD(spin) {
	DeviceBuf<int> flag(1);
	cudaMemset(flag.p, 0, sizeof(int));
	LAUNCH(4, 32, 0, 0, spin)(flag.p);
}

EMU_TEST(diag_watchdog) {
	CHECK(expect_abort("spin", {"TW_EMU_WATCHDOG=1"},
	                   {"kernel \"spin\"", "has run for over 1 s", "spin-wait"}));
}

// ---- Reverse order catches a missing barrier -----------------------------------------

// Each thread publishes a value, then reads its predecessor's. Without the
// barrier, running threads in order happens to work (the predecessor ran
// first); in reverse order the reads see stale memory.
__global__ void read_previous(const float *in, float *out, bool sync) {
	__shared__ float s[256];
	const int t = threadIdx.x;
	s[t] = in[blockIdx.x * 256 + t];
	if (sync) __syncthreads();
	out[blockIdx.x * 256 + t] = t > 0 ? s[t - 1] : 0.0f;
}

EMU_TEST(reverse_order_catches_missing_barrier) {
	const int blocks = 8, n = blocks * 256;
	std::vector<float> h(n);
	for (int i = 0; i < n; i++) h[i] = (float)i;
	DeviceBuf<float> in(n), out(n);
	in.upload(h);
	auto run = [&](bool sync, bool reverse) {
		return with_reverse(reverse, [&] {
			LAUNCH(blocks, 256, 0, 0, read_previous)(in.p, out.p, sync);
			return out.download();
		});
	};
	auto correct = [&](const std::vector<float> &o) {
		for (int i = 0; i < n; i++)
			if (o[i] != (i % 256 ? h[i - 1] : 0.0f)) return false;
		return true;
	};
	CHECK(correct(run(true, false)) && correct(run(true, true)));
	std::vector<float> fwd = run(false, false), rev = run(false, true);
	CHECK(correct(fwd)); // the bug hides in forward order...
	CHECK(fwd != rev);   // ...and shows when the two orders are compared
	CHECK(!correct(rev));
}
