// harness.h — a minimal test harness for the emulator self-tests.
//
// Contract: TEST(name) { ... } registers a test (EMU_TEST: only under the
// emulator); CHECK(cond) and friends
// record a failure (with file:line) and return from the test. CHILD(name)
// registers code that runs only in a child process started by
// expect_abort(), which checks that the child dies and that its stderr
// contains every expected string. Host code only uses the CUDA runtime API,
// so the tests compile with nvcc as well.
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

struct TestCase {
	const char *name;
	void (*fn)();
	bool child; // runs only in a child process
};

std::vector<TestCase> &test_registry();
bool &test_failed();

struct TestRegistrar {
	TestRegistrar(const char *name, void (*fn)(), bool child) { test_registry().push_back({name, fn, child}); }
};

#define TEST(name)                                                          \
	static void test_##name();                                                \
	static TestRegistrar registrar_##name(#name, test_##name, false);         \
	static void test_##name()

#define CHILD(name)                                                         \
	static void child_##name();                                               \
	static TestRegistrar registrar_child_##name(#name, child_##name, true);   \
	static void child_##name()

// Tests of the emulator itself: compiled everywhere, registered only under
// the emulator.
#ifdef TW_EMU
#define EMU_TEST(name) TEST(name)
#define EMU_CHILD(name) CHILD(name)
#else
#define EMU_TEST(name) [[maybe_unused]] static void test_##name()
#define EMU_CHILD(name) [[maybe_unused]] static void child_##name()
#endif

#define CHECK(cond)                                                                   \
	do {                                                                                \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
			test_failed() = true;                                                           \
			return;                                                                         \
		}                                                                                 \
	} while (0)

#define CHECKF(cond, ...)                                                             \
	do {                                                                                \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
			fprintf(stderr, __VA_ARGS__);                                                   \
			fprintf(stderr, "\n");                                                          \
			test_failed() = true;                                                           \
			return;                                                                         \
		}                                                                                 \
	} while (0)

#define CUDA_OK(call)                                                                          \
	do {                                                                                         \
		cudaError_t e_ = (call);                                                                   \
		CHECKF(e_ == cudaSuccess, "%s returned %s", #call, cudaGetErrorName(e_));                  \
	} while (0)

// Runs CHILD(name) in a new process with extra environment variables
// ("NAME=value"); true when it was killed by a signal or exited non-zero and
// its stderr contains every string in expect. On mismatch, prints its stderr.
bool expect_abort(const char *name, const std::vector<std::string> &env, const std::vector<std::string> &expect);

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall time of reps runs of f, in seconds.
template <class F> double median_time(int reps, F f) {
	std::vector<double> t;
	for (int i = 0; i < reps; i++) {
		auto t0 = std::chrono::steady_clock::now();
		f();
		t.push_back(seconds_since(t0));
	}
	for (size_t i = 1; i < t.size(); i++)
		for (size_t j = i; j > 0 && t[j] < t[j - 1]; j--) std::swap(t[j], t[j - 1]);
	return t[t.size() / 2];
}

#ifndef TW_EMU
// Under nvcc there is no emulator to steer.
inline void tw_emu_set_reverse(int) {}
inline int tw_emu_reverse() { return 0; }
#endif

// Runs f with the emulator's thread order set to reverse, then restores the
// order it had (the self-tests also run as a whole in reverse order).
template <class F> auto with_reverse(bool reverse, F f) {
	const int before = tw_emu_reverse();
	tw_emu_set_reverse(reverse);
	auto r = f();
	tw_emu_set_reverse(before);
	return r;
}

// Device buffer of n T's, freed at scope exit.
template <class T> struct DeviceBuf {
	T *p = nullptr;
	size_t n;
	explicit DeviceBuf(size_t count) : n(count) { cudaMalloc((void **)&p, n * sizeof(T)); }
	~DeviceBuf() { cudaFree(p); }
	DeviceBuf(const DeviceBuf &) = delete;
	DeviceBuf &operator=(const DeviceBuf &) = delete;
	void upload(const std::vector<T> &v) { cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice); }
	std::vector<T> download() const {
		std::vector<T> v(n);
		cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
		return v;
	}
};
