// runtime.cpp — the kernel emulator's execution engine: launches, fibers,
// barriers, warp collectives, and the checks that turn kernel bugs into
// messages instead of hangs.
//
// Contract:
//  - launch() runs the whole grid before it returns. Launches are serialised
//    (one at a time, from any host thread). A launch on a stream of another
//    context than the calling thread's current one fails, as does one asking
//    for more dynamic shared memory than the kernel's limit on the current
//    context's device (host.cpp keeps contexts, streams and limits). Blocks go to a pool of OS threads
//    (TW_EMU_THREADS, default min(cores, 16)) created at the first launch and
//    kept for the life of the process; each takes the next block number from
//    a shared counter and runs the block to completion.
//  - Within a block every thread is a fiber with its own stack (TW_EMU_STACK_KB,
//    default 64, with a guard region below it). The scheduler makes passes
//    over the threads in order (reversed with tw_emu_set_reverse /
//    TW_EMU_REVERSE=1); in a pass each runnable thread runs until it reaches
//    a barrier or a warp collective or returns, then switches directly to the
//    next runnable one. The last thread to arrive at a barrier releases the
//    others and carries on.
//  - A pass in which no thread can run is a deadlock: the block's threads,
//    grouped by where they wait, are reported and the process aborts. So are
//    threads meeting at different __syncthreads call sites, bad warp masks,
//    shuffles from lanes outside the mask, stack overflows and invalid memory
//    accesses inside kernels (SIGSEGV/SIGBUS, chained to any previous
//    handler for faults elsewhere; TW_EMU_SIGNALS=0 leaves the handlers
//    alone), and any block that runs longer than TW_EMU_WATCHDOG seconds
//    (default 60; 0 disables), which is how spin-waits that never end show.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"

// Dynamic shared memory: kernels declare `extern __shared__ unsigned char
// smem[];`, which under the emulator names this per-OS-thread buffer.
alignas(256) thread_local unsigned char smem[tw_emu::kSmemBytes];

// ---- Context switch (x86-64 System V) ---------------------------------------
//
// tw_emu_switch(save, to) pushes the callee-saved registers, stores the stack
// pointer in *save, loads `to` and pops the registers saved there. A new
// fiber's stack is laid out as if it had been switched out just before
// entering its start function. MXCSR and the x87 control word are not saved:
// kernels do not change rounding modes.
#if !defined(__x86_64__)
#error "tw-emu: the fiber context switch is written for x86-64"
#endif
extern "C" void tw_emu_switch(void **save_sp, void *to_sp);
asm(R"(
	.text
	.globl tw_emu_switch
	.hidden tw_emu_switch
	.type tw_emu_switch, @function
tw_emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size tw_emu_switch, .-tw_emu_switch
)");

namespace tw_emu {
namespace {

using Clock = std::chrono::steady_clock;

long long now_ns() {
	return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

enum State : uint8_t { kRunnable, kAtBarrier, kAtWarp, kAtActive, kDone };

// One thread of the running block. The fields a switch touches come first.
struct alignas(64) Fiber {
	void *sp;        // saved stack pointer while switched out
	State state;
	unsigned gen;    // at a block barrier: the barrier generation it waits for
	uint3 tid;
	int linear;      // x + y*bx + z*bx*by
	uint64_t result; // of the collective it waited at
	char *stack_lo;  // lowest usable stack address; the guard region lies below
	// Where the fiber waits, and what it brings to a collective.
	int op;          // BarrierOp or WarpOp
	unsigned mask;
	int variant, arg, width;
	int line;
	const char *file;
	uint64_t value;
	void *call_arg;
	void (*call_fn)(void *const *);
	const char *call_what;
};

struct Job {
	LaunchConfig cfg;
	void (*body)(void *);
	void *ctx;
	long nblocks;
	int nthreads;
	bool reverse;
};

struct Worker {
	std::vector<Fiber> fibers;
	std::vector<char *> stacks;
	void *sched_sp = nullptr;
	Fiber *cur = nullptr;
	const Job *job = nullptr;
	// The block being run.
	int nthreads = 0;
	bool reverse = false;
	int pos = 0;            // position of the running fiber in this pass
	bool ran = false;       // whether a fiber ran during this pass
	// The block barrier: threads waiting at it have state kAtBarrier and
	// gen == barrier_gen; completing it increments barrier_gen, which makes
	// them all runnable at once.
	unsigned barrier_gen = 0;
	int arrived = 0;        // threads waiting at the block barrier
	int barrier_count = 0;  // of non-zero predicates, for __syncthreads_count/and/or
	int barrier_result = 0; // of the last completed barrier
	int barrier_op = 0, barrier_line = 0;
	const char *barrier_file = nullptr; // the first arriver's call site
	bool barrier_divergent = false;     // a thread arrived from another call site
	int active_waiters = 0; // threads waiting in __activemask
	std::vector<int> warp_waiting; // per warp: lanes waiting at warp collectives
	int live = 0;           // threads not yet returned
	// Read by the watchdog on the launching thread.
	std::atomic<long long> block_start{0}; // ns; 0 while idle
	std::atomic<long> block{-1};
	std::atomic<int> running{-1};          // linear index of the running thread
};

struct Pool {
	std::mutex mu;
	std::condition_variable work_cv, done_cv;
	std::vector<Worker *> workers;
	const Job *job = nullptr;
	unsigned long long gen = 0;
	int active = 0;
	std::atomic<long> next{0};
	std::mutex launch_mu;
	long long watchdog_ns = 0;
};

thread_local Worker *tls_worker;
size_t g_stack_bytes, g_guard_bytes, g_page;
std::atomic<int> g_reverse{-1}; // -1: not yet read from the environment
struct sigaction g_old_segv, g_old_bus;

// ---- Messages -----------------------------------------------------------------

std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return buf;
}

std::string block_context(const Job &j, long b) {
	const dim3 g = j.cfg.grid, bd = j.cfg.block;
	return strf("kernel \"%s\", block (%ld,%ld,%ld) of grid (%u,%u,%u), block size (%u,%u,%u)", j.cfg.name,
	            b % (long)g.x, b / (long)g.x % (long)g.y, b / ((long)g.x * g.y), g.x, g.y, g.z, bd.x, bd.y, bd.z);
}

std::string thread_name(const Fiber &f) {
	return strf("thread %d (%u,%u,%u)", f.linear, f.tid.x, f.tid.y, f.tid.z);
}

[[noreturn]] void die(const std::string &msg) {
	std::string s = "tw-emu: " + msg + "\n";
	fflush(stdout);
	(void)!write(2, s.data(), s.size());
	abort();
}

const char *op_name(const Fiber &f) {
	if (f.state == kAtBarrier) {
		static const char *names[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or"};
		return names[f.op];
	}
	switch (f.op) {
	case kSyncwarp: return "__syncwarp";
	case kShfl: {
		static const char *names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
		return names[f.variant];
	}
	case kBallot: return "__ballot_sync";
	case kAny: return "__any_sync";
	case kAll: return "__all_sync";
	case kReduceAdd: return "__reduce_add_sync";
	case kReduceMin: return "__reduce_min_sync";
	case kReduceMax: return "__reduce_max_sync";
	case kWarpCall: return f.call_what;
	}
	return "?";
}

std::string wait_site(const Fiber &f) {
	switch (f.state) {
	case kDone: return "have returned";
	case kRunnable: return "can run";
	case kAtBarrier: return strf("wait at %s() %s:%d", op_name(f), f.file, f.line);
	case kAtWarp: return strf("wait at %s(mask 0x%08x) %s:%d", op_name(f), f.mask, f.file, f.line);
	case kAtActive: return strf("wait at __activemask() %s:%d", f.file, f.line);
	}
	return "?";
}

// The block's threads grouped into runs of consecutive threads that wait at
// the same place, one line per run.
std::string list_threads(const Worker &w) {
	std::string out;
	const int T = w.job->nthreads;
	int lines = 0;
	for (int i = 0; i < T;) {
		std::string site = wait_site(w.fibers[i]);
		int j = i + 1;
		while (j < T && wait_site(w.fibers[j]) == site) j++;
		if (++lines > 24) {
			out += "  ...\n";
			break;
		}
		out += j - i == 1 ? strf("  thread %d: ", i) : strf("  threads %d-%d: ", i, j - 1);
		out += site + "\n";
		i = j;
	}
	return out;
}

[[noreturn]] void report_deadlock(Worker &w) {
	die(block_context(*w.job, w.block.load()) +
	    ": no thread can go on (a barrier or warp collective that not every thread it waits for reaches):\n" +
	    list_threads(w) +
	    "  Every thread of a block must reach each __syncthreads (no early return before one, no barrier in a\n"
	    "  branch some threads skip); every lane named in a warp mask must make the same call with the same mask.");
}

// ---- Fibers -----------------------------------------------------------------

// Makes room for n fiber stacks on this worker: mapped on demand, never
// released (a worker keeps its largest block's stacks).
void ensure_fibers(Worker &w, int n) {
	if ((int)w.fibers.size() < n) w.fibers.resize(n);
	int have = (int)w.stacks.size();
	if (have >= n) return;
	size_t slot = g_guard_bytes + g_stack_bytes;
	size_t len = slot * (size_t)(n - have);
	char *base = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
	                          -1, 0);
	if (base == MAP_FAILED) die(strf("cannot map %zu bytes of fiber stacks: %s", len, strerror(errno)));
	for (int i = 0; i < n - have; i++) {
		char *s = base + slot * i;
		if (mprotect(s, g_guard_bytes, PROT_NONE) != 0)
			die(strf("cannot protect a fiber stack guard: %s (vm.max_map_count too low? fewer TW_EMU_THREADS?)",
			         strerror(errno)));
		w.stacks.push_back(s + g_guard_bytes);
	}
	for (int i = 0; i < n; i++) w.fibers[i].stack_lo = w.stacks[i];
}

void switch_on(Worker *w, Fiber *f);

[[noreturn]] void fiber_main() {
	Worker *w = tls_worker;
	w->job->body(w->job->ctx);
	Fiber *f = w->cur;
	f->state = kDone;
	w->live--;
	switch_on(w, f);
	__builtin_unreachable();
}

// A fresh stack that tw_emu_switch "returns" into fiber_main from, with the
// stack aligned as at a function's entry. Fiber i's stack starts i%64 cache
// lines below the top of its region: stack regions are a whole number of
// pages apart, and without the offset the hot top frames of all fibers would
// compete for the same few cache sets.
void *initial_stack(char *lo, int i) {
	uint64_t *sp = (uint64_t *)(lo + g_stack_bytes - (size_t)(i % 64) * 64); // 16-byte aligned
	*--sp = 0;                                       // fiber_main's return address: none
	*--sp = (uint64_t)(uintptr_t)fiber_main;         // popped by tw_emu_switch's ret
	for (int r = 0; r < 6; r++) *--sp = 0;           // rbp rbx r12 r13 r14 r15
	return sp;
}

inline Fiber *current(const char *what) {
	Worker *w = tls_worker;
	if (!w || !w->cur) die(strf("%s called outside a kernel", what));
	return w->cur;
}

// The fiber at position k of the scheduling order.
inline Fiber *at(Worker &w, int k) { return &w.fibers[w.reverse ? w.nthreads - 1 - k : k]; }

inline bool runnable(const Worker &w, const Fiber *f) {
	return f->state == kRunnable || (f->state == kAtBarrier && f->gen != w.barrier_gen);
}

// Makes f, at position w.pos, the running fiber. Resuming a fiber starts
// with a chain of cache misses on its stack (saved registers, then the
// innermost frames, all just above its saved stack pointer), so start
// fetching those of the fiber a few positions ahead, which is likely to run
// soon. Worth a few percent on barrier-heavy kernels.
inline void enter(Worker &w, Fiber *f) {
	f->state = kRunnable;
	w.cur = f;
	w.ran = true;
	threadIdx = f->tid;
	w.running.store(f->linear, std::memory_order_relaxed);
	if (w.pos + 3 < w.nthreads) {
		const char *sp = (const char *)at(w, w.pos + 3)->sp;
		for (int i = 0; i < 256; i += 64) __builtin_prefetch(sp + i);
	}
}

// Leaves fiber f (its state already set) for the next runnable fiber of the
// current pass, switching to it directly, or to the scheduler when the pass
// is over. Returns when f is resumed.
void switch_on(Worker *w, Fiber *f) {
	for (int k = w->pos + 1; k < w->nthreads; k++) {
		Fiber *g = at(*w, k);
		if (runnable(*w, g)) {
			w->pos = k;
			enter(*w, g);
			tw_emu_switch(&f->sp, g->sp);
			return;
		}
	}
	w->pos = w->nthreads;
	tw_emu_switch(&f->sp, w->sched_sp);
}

inline void park(Worker *w, Fiber *f) { switch_on(w, f); }

// Lanes waiting at __activemask get their answer once no lane of their warp
// can run: the lanes waiting at the same call. Returns whether any was
// released.
bool resolve_activemask(Worker &w) {
	bool released = false;
	const int T = w.nthreads;
	for (int first = 0; first < T && w.active_waiters > 0; first += 32) {
		const int n = T - first < 32 ? T - first : 32;
		Fiber *lanes = &w.fibers[first];
		bool waiting = false, runnable = false;
		for (int l = 0; l < n; l++) {
			waiting |= lanes[l].state == kAtActive;
			runnable |= tw_emu::runnable(w, &lanes[l]);
		}
		if (!waiting || runnable) continue;
		for (int l = 0; l < n; l++) {
			if (lanes[l].state != kAtActive) continue;
			unsigned m = 0; // the lanes at the same call
			for (int k = 0; k < n; k++)
				if (lanes[k].state == kAtActive && lanes[k].line == lanes[l].line &&
				    strcmp(lanes[k].file, lanes[l].file) == 0)
					m |= 1u << k;
			for (int k = 0; k < n; k++)
				if (m >> k & 1) {
					lanes[k].result = m;
					lanes[k].state = kRunnable;
					w.active_waiters--;
				}
			released = true;
		}
	}
	return released;
}

void run_block(Worker &w, long b) {
	const Job &j = *w.job;
	const dim3 g = j.cfg.grid, bd = j.cfg.block;
	blockIdx = uint3{(unsigned)(b % g.x), (unsigned)(b / g.x % g.y), (unsigned)(b / ((long)g.x * g.y))};
	blockDim = bd;
	gridDim = g;
	if (j.cfg.smem) memset(smem, 0xff, j.cfg.smem);
	const int T = j.nthreads;
	for (int i = 0; i < T; i++) {
		Fiber &f = w.fibers[i];
		f.sp = initial_stack(f.stack_lo, i);
		f.tid = uint3{i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y)};
		f.linear = i;
		f.state = kRunnable;
	}
	w.nthreads = T;
	w.reverse = j.reverse;
	w.arrived = 0;
	w.barrier_count = 0;
	w.active_waiters = 0;
	w.warp_waiting.assign((T + 31) / 32, 0);
	w.live = T;
	w.block.store(b, std::memory_order_relaxed);
	w.block_start.store(now_ns(), std::memory_order_relaxed);
	const bool count_banks = banks::on();
	if (count_banks) banks::block_begin();
	while (w.live > 0) {
		// One pass: resume the runnable fibers in order. Each runs until it
		// waits or returns and then hands over to the next runnable one
		// itself (switch_on); the last of the pass switches back here.
		w.ran = false;
		for (w.pos = 0; w.pos < T;) {
			Fiber *f = at(w, w.pos);
			if (!runnable(w, f)) {
				w.pos++;
				continue;
			}
			enter(w, f);
			tw_emu_switch(&w.sched_sp, f->sp);
		}
		if (w.active_waiters > 0 && resolve_activemask(w)) continue;
		if (!w.ran) report_deadlock(w);
	}
	w.cur = nullptr;
	if (count_banks) banks::block_end(j.cfg.name);
	w.block_start.store(0, std::memory_order_relaxed);
}

// ---- Pool -------------------------------------------------------------------

void worker_main(Pool *p, Worker *w) {
	tls_worker = w;
	static const size_t kAltStack = 64 * 1024;
	stack_t ss{};
	ss.ss_sp = malloc(kAltStack);
	ss.ss_size = kAltStack;
	sigaltstack(&ss, nullptr);
	unsigned long long seen = 0;
	for (;;) {
		const Job *j;
		{
			std::unique_lock<std::mutex> l(p->mu);
			p->work_cv.wait(l, [&] { return p->gen != seen; });
			seen = p->gen;
			j = p->job;
		}
		w->job = j;
		ensure_fibers(*w, j->nthreads);
		for (;;) {
			long b = p->next.fetch_add(1, std::memory_order_relaxed);
			if (b >= j->nblocks) break;
			run_block(*w, b);
		}
		std::lock_guard<std::mutex> l(p->mu);
		if (--p->active == 0) p->done_cv.notify_all();
	}
}

void chain_signal(int sig, siginfo_t *si, void *uc) {
	struct sigaction *old = sig == SIGSEGV ? &g_old_segv : &g_old_bus;
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
		old->sa_sigaction(sig, si, uc);
	} else if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	} else {
		signal(sig, SIG_DFL); // the faulting instruction runs again and gets the default action
	}
}

void on_fault(int sig, siginfo_t *si, void *uc) {
	Worker *w = tls_worker;
	if (!w || !w->cur) return chain_signal(sig, si, uc);
	const Fiber &f = *w->cur;
	const char *a = (const char *)si->si_addr;
	std::string where = block_context(*w->job, w->block.load()) + ", " + thread_name(f);
	if (a < f.stack_lo && a >= f.stack_lo - g_guard_bytes)
		die("stack overflow in " + where + strf(": fiber stacks are %zu KiB (TW_EMU_STACK_KB raises it)", g_stack_bytes / 1024));
	die(strf("invalid memory access (%s at address %p) in ", sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", (const void *)a) +
	    where);
}

Pool *create_pool() {
	g_page = (size_t)sysconf(_SC_PAGESIZE);
	g_stack_bytes = ((size_t)env_long("TW_EMU_STACK_KB", 64) * 1024 + g_page - 1) / g_page * g_page;
	if (g_stack_bytes < 16 * 1024) g_stack_bytes = 16 * 1024;
	g_guard_bytes = 4 * g_page;
	Pool *p = new Pool; // never freed: workers wait on its condition variables until the process exits
	p->watchdog_ns = env_long("TW_EMU_WATCHDOG", 60) * 1000000000LL;
	long n = env_long("TW_EMU_THREADS", 0);
	if (n <= 0) {
		n = (long)std::thread::hardware_concurrency();
		if (n > 16) n = 16;
		if (n < 1) n = 1;
	}
	if (env_long("TW_EMU_SIGNALS", 1) != 0) {
		struct sigaction sa{};
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, &g_old_segv);
		sigaction(SIGBUS, &sa, &g_old_bus);
	}
	// Workers start with asynchronous signals blocked, so that signals meant
	// for the process are delivered to its own threads.
	sigset_t all, old;
	sigfillset(&all);
	for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&all, s);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (long i = 0; i < n; i++) {
		Worker *w = new Worker;
		p->workers.push_back(w);
		std::thread(worker_main, p, w).detach();
	}
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return p;
}

Pool &pool() {
	static Pool *p = create_pool();
	return *p;
}

cudaError_t launch_error(const LaunchConfig &c, cudaError_t e, const std::string &why) {
	set_last_error(e);
	fprintf(stderr, "tw-emu: launch of kernel \"%s\" failed (%s): %s\n", c.name, cudaGetErrorName(e), why.c_str());
	return e;
}

// ---- Warp collectives ---------------------------------------------------------

// Runs a complete collective: every lane in mask waits at op with that mask.
// Fills each lane's result and makes them runnable.
void complete_warp(Fiber *lanes, unsigned mask, int op) {
	uint64_t acc = 0;
	int64_t sacc = 0;
	bool first = true;
	void *args[32] = {};
	for (unsigned m = mask; m; m &= m - 1) {
		int l = __builtin_ctz(m);
		Fiber &f = lanes[l];
		switch (op) {
		case kShfl: {
			// Source lane within the lane's width segment; out of the
			// segment, up/down/xor return the lane's own value.
			int w = f.width, base = l & ~(w - 1), src = l;
			switch (f.variant) {
			case kShflIdx: src = base + (f.arg & (w - 1)); break;
			case kShflUp: src = l - f.arg >= base ? l - f.arg : l; break;
			case kShflDown: src = l + f.arg < base + w ? l + f.arg : l; break;
			case kShflXor: src = (l ^ f.arg) < base + w ? (l ^ f.arg) : l; break;
			}
			if (src < 0 || src > 31) src = l; // a negative or huge lane argument
			if (!(mask >> src & 1))
				die(strf("%s at %s:%d: lane %d reads lane %d, which is not in the mask 0x%08x", op_name(f), f.file, f.line,
				         l, src, mask) +
				    " (" + block_context(*tls_worker->job, tls_worker->block.load()) + ")");
			f.result = lanes[src].value;
			break;
		}
		case kBallot: case kAny: case kAll: acc |= (uint64_t)(f.value != 0) << l; break;
		case kReduceAdd: acc += f.value; break;
		case kReduceMin: case kReduceMax: {
			int64_t v = f.variant ? (int64_t)(int32_t)(uint32_t)f.value : (int64_t)f.value;
			if (first || (op == kReduceMin ? v < sacc : v > sacc)) sacc = v;
			first = false;
			break;
		}
		case kWarpCall: args[l] = f.call_arg; break;
		}
	}
	uint64_t r = 0;
	switch (op) {
	case kBallot: r = acc; break;
	case kAny: r = acc != 0; break;
	case kAll: r = acc == mask; break;
	case kReduceAdd: r = (uint32_t)acc; break;
	case kReduceMin: case kReduceMax: r = (uint32_t)sacc; break;
	case kWarpCall: lanes[__builtin_ctz(mask)].call_fn(args); break;
	}
	for (unsigned m = mask; m; m &= m - 1) {
		Fiber &f = lanes[__builtin_ctz(m)];
		if (op != kShfl) f.result = r;
		f.state = kRunnable;
	}
}

uint64_t warp_arrive(Fiber *f, int op, unsigned mask, const char *file, int line) {
	Worker *w = tls_worker;
	const int lane = f->linear & 31, first = f->linear & ~31;
	const int n = w->job->nthreads - first; // threads in this warp, if fewer than 32
	const unsigned exists = n >= 32 ? 0xffffffffu : (1u << n) - 1;
	f->state = kAtWarp;
	f->op = op;
	f->mask = mask;
	f->file = file;
	f->line = line;
	if (!(mask >> lane & 1))
		die(strf("%s(mask 0x%08x) at %s:%d: the mask leaves out the calling lane %d (", op_name(*f), mask, file, line, lane) +
		    block_context(*w->job, w->block.load()) + ", " + thread_name(*f) + ")");
	if (mask & ~exists)
		die(strf("%s(mask 0x%08x) at %s:%d: the mask names lanes this warp does not have (it has %d threads; ",
		         op_name(*f), mask, file, line, n) +
		    block_context(*w->job, w->block.load()) + ")");
	// Complete only once every lane in mask waits here with the same mask.
	// Counting the warp's waiting lanes first spares the full check on all
	// but the last arrivals.
	Fiber *lanes = &w->fibers[first];
	if (++w->warp_waiting[first / 32] < __builtin_popcount(mask)) {
		park(w, f);
		return f->result;
	}
	for (unsigned m = mask; m; m &= m - 1) {
		const Fiber &g = lanes[__builtin_ctz(m)];
		if (g.state != kAtWarp || g.op != op || g.mask != mask || (op == kWarpCall && g.call_fn != f->call_fn)) {
			park(w, f);
			return f->result;
		}
	}
	w->warp_waiting[first / 32] -= __builtin_popcount(mask);
	complete_warp(lanes, mask, op);
	return f->result;
}

} // namespace

// ---- Entry points from tw_emu.h -----------------------------------------------

namespace {

// The last thread has arrived at a block barrier: check that all came from
// one call site, then release them.
__attribute__((noinline)) int complete_barrier(Worker *w, Fiber *f) {
	if (w->barrier_divergent)
		die(block_context(*w->job, w->block.load()) +
		    ": divergent __syncthreads: the threads of the block wait at different barriers:\n" + list_threads(*w));
	const int T = w->nthreads, n = w->barrier_count;
	const int op = w->barrier_op;
	w->barrier_result = op == kSyncthreadsCount ? n : op == kSyncthreadsAnd ? n == T : op == kSyncthreadsOr ? n > 0 : 0;
	w->arrived = 0;
	w->barrier_count = 0;
	w->barrier_gen++;
	f->state = kRunnable;
	return w->barrier_result;
}

} // namespace

int block_barrier(int op, int pred, const char *file, int line) {
	Worker *w = tls_worker;
	Fiber *f = current("__syncthreads");
	f->state = kAtBarrier;
	f->gen = w->barrier_gen;
	f->op = op;
	f->file = file;
	f->line = line;
	if (w->arrived == 0) {
		w->barrier_op = op;
		w->barrier_file = file;
		w->barrier_line = line;
		w->barrier_divergent = false;
	} else if (op != w->barrier_op || line != w->barrier_line ||
	           (file != w->barrier_file && strcmp(file, w->barrier_file) != 0)) {
		w->barrier_divergent = true;
	}
	w->barrier_count += pred != 0;
	if (++w->arrived < w->nthreads) {
		park(w, f);
		return w->barrier_result; // set by the last arriver; valid until this thread arrives again
	}
	return complete_barrier(w, f);
}

uint64_t warp_op(int op, unsigned mask, uint64_t value, int variant, int arg, int width, const char *file, int line) {
	Fiber *f = current("a warp collective");
	if (op == kShfl && (width < 1 || width > 32 || (width & (width - 1))))
		fail("%s: width %d is not a power of two in 1..32 (%s:%d)", variant == kShflIdx ? "__shfl_sync" : "a shuffle",
		     width, file, line);
	f->value = value;
	f->variant = variant;
	f->arg = arg;
	f->width = width;
	return warp_arrive(f, op, mask, file, line);
}

void warp_call(void (*fn)(void *const *), void *arg, const char *what, const char *file, int line) {
	Fiber *f = current(what);
	f->call_fn = fn;
	f->call_arg = arg;
	f->call_what = what;
	warp_arrive(f, kWarpCall, 0xffffffffu, file, line);
}

unsigned active_mask(const char *file, int line) {
	Worker *w = tls_worker;
	Fiber *f = current("__activemask");
	f->state = kAtActive;
	f->file = file;
	f->line = line;
	w->active_waiters++;
	park(w, f);
	return (unsigned)f->result;
}

void yield() {
	Worker *w = tls_worker;
	Fiber *f = current("__nanosleep");
	park(w, f); // stays runnable: the scheduler resumes it on its next pass
}

long long clock_ns() { return now_ns(); }

void fail(const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	std::string msg = buf;
	Worker *w = tls_worker;
	if (w && w->cur) msg += " (" + block_context(*w->job, w->block.load()) + ", " + thread_name(*w->cur) + ")";
	die(msg);
}

cudaError_t launch(const LaunchConfig &c, void (*body)(void *), void *ctx) {
	if (tls_worker && tls_worker->cur) fail("kernel \"%s\" launched from a kernel: not supported", c.name);
	const dim3 g = c.grid, b = c.block;
	const long long nthreads = (long long)b.x * b.y * b.z;
	if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || nthreads > 1024)
		return launch_error(c, cudaErrorInvalidConfiguration,
		                    strf("block size (%u,%u,%u): each of x, y ≤ 1024, z ≤ 64, x·y·z ≤ 1024", b.x, b.y, b.z));
	if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
		return launch_error(c, cudaErrorInvalidConfiguration,
		                    strf("grid size (%u,%u,%u): x in 1..2^31-1, y and z in 1..65535", g.x, g.y, g.z));
	std::string why;
	if (cudaError_t e = check_stream(c.stream, &why)) return launch_error(c, e, why);
	const size_t limit = func_smem_limit(c.func);
	if (c.smem > limit)
		return launch_error(c, cudaErrorInvalidValue,
		                    strf("%zu bytes of dynamic shared memory, over this kernel's limit of %zu (raise it with "
		                         "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "
		                         "at most %zu)",
		                         c.smem, limit, smem_optin_limit()));
	cudaError_t captured;
	if (capture_launch(c, body, ctx, &captured)) {
		if (captured != cudaSuccess) set_last_error(captured);
		return captured;
	}
	Pool &p = pool();
	Job j{c, body, ctx, (long)g.x * g.y * g.z, (int)nthreads, tw_emu_reverse() != 0};
	std::lock_guard<std::mutex> serial(p.launch_mu);
	std::unique_lock<std::mutex> l(p.mu);
	p.job = &j;
	p.next.store(0);
	p.active = (int)p.workers.size();
	p.gen++;
	p.work_cv.notify_all();
	while (p.active > 0) {
		p.done_cv.wait_for(l, std::chrono::milliseconds(250));
		if (p.watchdog_ns <= 0) continue;
		const long long t = now_ns();
		for (Worker *w : p.workers) {
			const long long start = w->block_start.load(std::memory_order_relaxed);
			if (start == 0 || t - start <= p.watchdog_ns) continue;
			die(block_context(j, w->block.load()) +
			    strf(": the block has run for over %lld s (thread %d was running): a spin-wait that never ends? "
			         "(TW_EMU_WATCHDOG sets the limit in seconds; 0 disables it)",
			         p.watchdog_ns / 1000000000LL, w->running.load()));
		}
	}
	p.job = nullptr;
	after_launch(c.stream);
	return cudaSuccess;
}

long env_long(const char *name, long def) {
	const char *s = getenv(name);
	if (!s || !*s) return def;
	char *end;
	long v = strtol(s, &end, 10);
	return *end ? def : v;
}

} // namespace tw_emu

extern "C" void tw_emu_set_reverse(int on) { tw_emu::g_reverse.store(on != 0); }

extern "C" int tw_emu_reverse(void) {
	int r = tw_emu::g_reverse.load();
	if (r < 0) {
		r = tw_emu::env_long("TW_EMU_REVERSE", 0) != 0;
		int expected = -1;
		if (!tw_emu::g_reverse.compare_exchange_strong(expected, r)) r = expected;
	}
	return r;
}
