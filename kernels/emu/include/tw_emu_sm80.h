// tw_emu_sm80.h — the shared state space and sm_80's asynchronous copies
// (cp.async) for the kernel emulator. tw_emu.h includes it; kernels reach
// it through kernels/sm80.cuh, which is inline PTX under nvcc.
//
// Shared memory, as the emulator has it: the running block's OS thread's
// thread-local storage in the module that holds the emulator (where
// __shared__ variables and the dynamic `smem` live). in_shared(p, n) tells
// whether [p, p+n) lies there; a fiber's stack (local memory) and cudaMalloc
// memory (global) do not.
//
// Contract of the copies (PTX's cp.async, per CUDA thread):
//  - cp_async(dst, src, cp_size, src_size) issues a copy of cp_size bytes
//    (4, 8 or 16) to dst in shared memory: the first src_size bytes
//    (0 ≤ src_size ≤ cp_size) from src, which must not be shared memory,
//    then zeros; src is not read when src_size is 0. dst and src are
//    cp_size-aligned.
//  - Until a wait covers it, the copy's destination is undefined: the
//    emulator writes the 0xFF pattern (NaN in f32, bf16 and f16) there when
//    the copy is issued, and performs the copy, reading src then, when a wait
//    covers it. A read of the destination before the covering wait (no wait,
//    a wait that leaves the copy's group pending, no barrier between another
//    thread's wait and the read) thus sees NaN; so does a thread that still
//    reads memory another thread has issued a copy into (no barrier before
//    the copy).
//  - cp_async_commit() closes the group of the calling thread's copies
//    issued since its last commit (an empty group is a group).
//    cp_async_wait(n) completes every copy of the calling thread's committed
//    groups but the n most recent, in issue order; copies not yet committed
//    stay pending. cp_async_wait_all() is a commit and cp_async_wait(0).
//  - Each CUDA thread starts with no copies pending; copies it leaves
//    pending when it returns are dropped (no thread can wait for them).
//  - Misuse aborts with a message naming the call site, kernel, block and
//    thread: a bad size, a misaligned address, a destination outside shared
//    memory or a source inside it, more than kMaxPending pending copies in
//    one thread (the emulator's limit, not the hardware's).
#ifndef TW_EMU_SM80_H
#define TW_EMU_SM80_H

#include <link.h>
#include <stdlib.h>

namespace tw_emu {

// ---- The shared state space ---------------------------------------------------

struct AddrRange {
	uintptr_t lo, hi;
};
// This OS thread's shared-memory range; hi == 0 until first looked up.
inline thread_local AddrRange tls_shared_range;

// Finds the thread-local storage block of the module that defines threadIdx
// (the emulator's module, which also holds every __shared__ variable).
__attribute__((noinline)) inline AddrRange find_shared_range() {
	struct Ctx {
		uintptr_t probe;
		AddrRange r;
	} c{(uintptr_t)&threadIdx, {0, 0}};
	dl_iterate_phdr(
		[](dl_phdr_info *info, size_t, void *arg) -> int {
			Ctx *c = static_cast<Ctx *>(arg);
			if (!info->dlpi_tls_data) return 0;
			for (int i = 0; i < info->dlpi_phnum; i++) {
				if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
				const uintptr_t lo = (uintptr_t)info->dlpi_tls_data, hi = lo + info->dlpi_phdr[i].p_memsz;
				if (c->probe >= lo && c->probe < hi) {
					c->r = AddrRange{lo, hi};
					return 1;
				}
			}
			return 0;
		},
		&c);
	if (c.r.hi == 0) fail("tw-emu: cannot locate the thread-local storage that holds shared memory");
	return c.r;
}

// Whether the n bytes at p lie in the calling OS thread's shared memory.
inline bool in_shared(const void *p, size_t n) {
	if (tls_shared_range.hi == 0) tls_shared_range = find_shared_range();
	const uintptr_t a = (uintptr_t)p;
	return a >= tls_shared_range.lo && a <= tls_shared_range.hi && n <= tls_shared_range.hi - a;
}

// ---- cp.async -------------------------------------------------------------------

namespace async {

struct Copy {
	unsigned char *dst;
	const unsigned char *src;
	uint32_t group; // the commit group it belongs to (groups are numbered from 0)
	uint8_t size, src_size;
};

constexpr int kMaxPending = 128; // pending copies per CUDA thread
constexpr int kMaxThreads = 1024; // CUDA threads per block

// One CUDA thread's copies.
struct ThreadCopies {
	uint32_t committed; // groups committed so far
	uint32_t n;         // pending copies, in issue order: q[0..n)
	Copy q[kMaxPending];
};

// Per OS thread: the copies of each thread of the block it runs, by linear
// thread index; allocated at the first copy (calloc: untouched slots cost no
// memory), kept for the life of the OS thread.
inline thread_local ThreadCopies *tls_copies;

inline int linear_thread() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }

inline ThreadCopies &self() {
	if (!tls_copies) {
		tls_copies = static_cast<ThreadCopies *>(calloc(kMaxThreads, sizeof(ThreadCopies)));
		if (!tls_copies) fail("tw-emu: cannot allocate the cp.async queues");
	}
	return tls_copies[linear_thread()];
}

// Called as each CUDA thread starts (tw_emu.h's launch): no copies pending.
inline void thread_begin() {
	if (!tls_copies) return;
	ThreadCopies &t = tls_copies[linear_thread()];
	t.committed = 0;
	t.n = 0;
}

inline void perform(const Copy &c) {
	if (c.src_size) memcpy(c.dst, c.src, c.src_size);
	memset(c.dst + c.src_size, 0, (size_t)(c.size - c.src_size));
}

} // namespace async

inline void cp_async(void *dst, const void *src, int cp_size, int src_size, const char *file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
	if (cp_size != 4 && cp_size != 8 && cp_size != 16)
		fail("cp.async at %s:%d: copy size %d (4, 8 or 16 bytes)", file, line, cp_size);
	if (src_size < 0 || src_size > cp_size)
		fail("cp.async at %s:%d: source size %d outside 0..%d", file, line, src_size, cp_size);
	if ((uintptr_t)dst % cp_size != 0 || (uintptr_t)src % cp_size != 0)
		fail("cp.async at %s:%d: destination %p or source %p not aligned to the copy size %d", file, line, dst, src,
		     cp_size);
	if (!in_shared(dst, (size_t)cp_size))
		fail("cp.async at %s:%d: destination %p is not in shared memory", file, line, dst);
	if (in_shared(src, 1)) fail("cp.async at %s:%d: source %p is in shared memory, not global", file, line, src);
	async::ThreadCopies &t = async::self();
	if (t.n == (uint32_t)async::kMaxPending)
		fail("cp.async at %s:%d: more than %d copies pending in one thread (the emulator's limit; wait for some)", file,
		     line, async::kMaxPending);
	if (banks::on()) banks::thread_access("cp.async", (uintptr_t)dst, cp_size, src, src_size, file, line);
	memset(dst, 0xff, (size_t)cp_size); // undefined until a wait covers the copy
	t.q[t.n++] = async::Copy{static_cast<unsigned char *>(dst), static_cast<const unsigned char *>(src), t.committed,
	                         (uint8_t)cp_size, (uint8_t)src_size};
}

inline void cp_async_commit() { async::self().committed++; }

// A thread's load or store of n bytes at p made through the kernels' pack
// helpers (kernels/pack.cuh, vec.cuh), counted by the bank model when it is
// on: as op_shared in wavefronts where p is shared memory, else as
// op_global in sectors of global memory. No instruction moves more than 16
// bytes a lane, so a wider access (a pack of 8 f32) is counted as the
// 16-byte accesses the compiler makes of it, one instruction each: the
// lanes' first halves, then their second halves.
inline void count_access(const char *op_global, const char *op_shared, const void *p, int n, const char *file,
                         int line) {
	if (!banks::on()) return;
	const char *c = static_cast<const char *>(p);
	for (int k = 0; k < n; k += 16) {
		const int m = n - k < 16 ? n - k : 16;
		if (in_shared(c + k, (size_t)m)) banks::thread_access(op_shared, (uintptr_t)(c + k), m, nullptr, 0, file, line);
		else banks::thread_access(op_global, 0, 0, c + k, m, file, line);
	}
}

// A thread's plain load or store (op: "ld.shared", "st.shared") of n bytes
// at p, which must be shared memory aligned to n; counted by the bank model
// when it is on. kernels/sm80.cuh's ld_shared and st_shared call it.
inline void shared_access(const char *op, const void *p, int n, const char *file, int line) {
	if ((uintptr_t)p % (uintptr_t)n != 0 || !in_shared(p, (size_t)n))
		fail("%s at %s:%d: address %p is not %d-byte aligned or not in shared memory", op, file, line, p, n);
	if (banks::on()) banks::thread_access(op, (uintptr_t)p, n, nullptr, 0, file, line);
}

inline void cp_async_wait(int n, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	if (n < 0) fail("cp.async.wait_group at %s:%d: negative group count %d", file, line, n);
	async::ThreadCopies &t = async::self();
	const uint32_t done = t.committed > (uint32_t)n ? t.committed - (uint32_t)n : 0; // groups [0, done) complete
	uint32_t k = 0;
	while (k < t.n && t.q[k].group < done) async::perform(t.q[k++]);
	if (k == 0) return;
	t.n -= k;
	memmove(t.q, t.q + k, t.n * sizeof(async::Copy));
}

inline void cp_async_wait_all() {
	cp_async_commit();
	cp_async_wait(0);
}

} // namespace tw_emu

#endif // TW_EMU_SM80_H
