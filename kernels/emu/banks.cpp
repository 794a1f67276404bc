// banks.cpp — counts the shared-memory wavefronts and the global-memory
// sectors of the accesses the emulator sees a warp make, by the model in
// include/tw_emu_banks.h, per call site of each kernel.
//
// Each OS thread keeps the counts of the block it runs (and the per-thread
// accesses — cp.async, stores, the pack helpers' loads and stores — of its
// threads, which are grouped into warp instructions only once the block has
// ended: a lane's fiber runs ahead of the others between barriers) and adds
// them to the process-wide table when the block ends.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "internal.h"

namespace tw_emu {
namespace banks {
namespace {

// TW_EMU_BANKS=1 turns counting on from start-up.
const bool g_on_at_start = [] {
	const bool on = env_long("TW_EMU_BANKS", 0) != 0;
	if (on) g_on.store(true);
	return on;
}();

// Counts at one call site.
struct Site {
	const char *kernel, *op, *file;
	int line;
	unsigned long long requests, wavefronts, ideal;
	unsigned long long sectors, sectors_ideal; // accesses of global memory
	int lane_bytes;                            // the fewest bytes one lane moved
};

bool same(const char *a, const char *b) { return a == b || strcmp(a, b) == 0; }

// Adds c's counts to the site of sites with c's key (kernel, op, file,
// line), or appends c.
void merge(std::vector<Site> &sites, const Site &c) {
	for (Site &s : sites)
		if (s.line == c.line && same(s.op, c.op) && same(s.file, c.file) &&
		    (s.kernel == c.kernel || (s.kernel && c.kernel && same(s.kernel, c.kernel)))) {
			s.requests += c.requests;
			s.wavefronts += c.wavefronts;
			s.ideal += c.ideal;
			s.sectors += c.sectors;
			s.sectors_ideal += c.sectors_ideal;
			s.lane_bytes = std::min(s.lane_bytes, c.lane_bytes);
			return;
		}
	sites.push_back(c);
}

std::mutex g_mu;
std::vector<Site> g_sites; // every block's counts so far

// One access of one thread, and which of that thread's accesses at its call
// site it is.
struct Access {
	uintptr_t addr, global; // the shared bytes (size of them), the global bytes (global_size)
	const char *op, *file;
	int line, size, global_size, warp, lane;
	unsigned nth;
};

// What the running block has counted on this OS thread.
struct Block {
	std::vector<Site> sites; // kernel unset until the block ends
	std::vector<Access> accesses;
	// Per CUDA thread, its accesses so far per call site.
	struct Count {
		const char *file;
		int line;
		unsigned n;
	};
	std::vector<std::vector<Count>> counts;
};
thread_local Block tls_block;

// The wavefronts of one phase: n accesses of size bytes (2, 4, 8 or 16,
// aligned to it) at addr[0..n): the most distinct words one bank is asked
// for.
int phase_wavefronts(const uintptr_t *addr, int n, int size) {
	uintptr_t words[32][32]; // per bank, the distinct words asked of it
	int count[32] = {0}, worst = 0;
	for (int i = 0; i < n; i++)
		for (int w = 0; w < std::max(1, size / 4); w++) {
			const uintptr_t word = addr[i] / 4 + (uintptr_t)w;
			const int bank = (int)(word & 31);
			bool seen = false;
			for (int k = 0; k < count[bank] && !seen; k++) seen = words[bank][k] == word;
			if (seen) continue;
			words[bank][count[bank]++] = word;
			worst = std::max(worst, count[bank]);
		}
	return worst;
}

// The 32-byte sectors of global memory that the n lanes' accesses at a
// touch (*sectors), and the fewest that could hold the bytes they touch:
// their union, in whole sectors (*ideal). Copies of 0 bytes read nothing.
void global_sectors(const Access *a, size_t n, unsigned *sectors, unsigned *ideal) {
	std::vector<std::pair<uintptr_t, uintptr_t>> r; // [lo, hi) read
	for (size_t k = 0; k < n; k++)
		if (a[k].global_size > 0) r.emplace_back(a[k].global, a[k].global + (uintptr_t)a[k].global_size);
	std::sort(r.begin(), r.end());
	uintptr_t bytes = 0, last_sector = 0;
	bool any = false;
	for (size_t k = 0; k < r.size();) {
		uintptr_t lo = r[k].first, hi = r[k].second;
		for (k++; k < r.size() && r[k].first <= hi; k++) hi = std::max(hi, r[k].second);
		bytes += hi - lo;
		for (uintptr_t s = lo / 32; s <= (hi - 1) / 32; s++)
			if (!any || s > last_sector) {
				(*sectors)++;
				last_sector = s;
				any = true;
			}
	}
	*ideal = (unsigned)((bytes + 31) / 32);
}

} // namespace

void rows16(const char *op, const uintptr_t *row, int n, const char *file, int line) {
	int wavefronts = 0;
	for (int p = 0; p < n; p += 8) wavefronts += phase_wavefronts(row + p, 8, 16);
	merge(tls_block.sites, Site{nullptr, op, file, line, 1, (unsigned)wavefronts, (unsigned)n / 8, 0, 0, 16});
}

void thread_access(const char *op, uintptr_t addr, int size, const void *global, int global_size, const char *file,
                   int line) {
	Block &b = tls_block;
	const int t = async::linear_thread();
	if ((int)b.counts.size() <= t) b.counts.resize((size_t)t + 1);
	unsigned nth = 0;
	bool found = false;
	for (Block::Count &c : b.counts[(size_t)t])
		if (c.line == line && same(c.file, file)) {
			nth = c.n++;
			found = true;
			break;
		}
	if (!found) b.counts[(size_t)t].push_back(Block::Count{file, line, 1});
	b.accesses.push_back(Access{addr, (uintptr_t)global, op, file, line, size, global_size, t / 32, t % 32, nth});
}

void block_begin() {
	Block &b = tls_block;
	b.sites.clear();
	b.accesses.clear();
	for (auto &c : b.counts) c.clear();
}

void block_end(const char *kernel) {
	Block &b = tls_block;
	// The accesses as warp instructions: a warp's lanes' nth accesses at a
	// call site, in lane order.
	std::vector<Access> &acc = b.accesses;
	std::sort(acc.begin(), acc.end(), [](const Access &x, const Access &y) {
		if (x.warp != y.warp) return x.warp < y.warp;
		if (x.line != y.line) return x.line < y.line;
		if (const int c = x.file == y.file ? 0 : strcmp(x.file, y.file)) return c < 0;
		if (x.nth != y.nth) return x.nth < y.nth;
		return x.lane < y.lane;
	});
	for (size_t i = 0; i < acc.size();) {
		size_t j = i;
		while (j < acc.size() && acc[j].warp == acc[i].warp && acc[j].line == acc[i].line &&
		       same(acc[j].file, acc[i].file) && acc[j].nth == acc[i].nth)
			j++;
		// Lanes [i, j) of one instruction; phases of 128 bytes of lanes (none
		// for an access of global memory alone).
		const int size = acc[i].size, per_phase = size > 0 ? std::max(1, 128 / size) : 0;
		int wavefronts = 0, ideal = 0;
		for (size_t k = i; k < j && size > 0;) {
			const int phase = acc[k].lane / per_phase;
			uintptr_t addr[32];
			int n = 0;
			for (; k < j && acc[k].lane / per_phase == phase; k++) addr[n++] = acc[k].addr;
			wavefronts += phase_wavefronts(addr, n, size);
			ideal++;
		}
		unsigned sectors = 0, sectors_ideal = 0;
		global_sectors(&acc[i], j - i, &sectors, &sectors_ideal);
		int lane_bytes = std::max(acc[i].size, acc[i].global_size);
		for (size_t k = i; k < j; k++) lane_bytes = std::min(lane_bytes, std::max(acc[k].size, acc[k].global_size));
		merge(b.sites, Site{nullptr, acc[i].op, acc[i].file, acc[i].line, 1, (unsigned)wavefronts, (unsigned)ideal,
		                    sectors, sectors_ideal, lane_bytes});
		i = j;
	}
	if (b.sites.empty()) return;
	std::lock_guard<std::mutex> l(g_mu);
	for (Site s : b.sites) {
		s.kernel = kernel;
		merge(g_sites, s);
	}
}

// With TW_EMU_BANKS=1: the table, at exit, on stderr.
void report() {
	std::lock_guard<std::mutex> l(g_mu);
	fprintf(stderr, "tw-emu: shared-memory wavefronts by call site (TW_EMU_BANKS; model in tw_emu_banks.h)\n");
	fprintf(stderr, "%12s %12s %12s %7s %12s %12s  %-16s %s\n", "requests", "wavefronts", "ideal", "excess",
	        "sectors", "ideal", "op", "site, kernel");
	for (const Site &s : g_sites)
		fprintf(stderr, "%12llu %12llu %12llu %6.2fx %12llu %12llu  %-16s %s:%d, %s\n", s.requests, s.wavefronts, s.ideal,
		        s.ideal ? (double)s.wavefronts / (double)s.ideal : 0.0, s.sectors, s.sectors_ideal, s.op, s.file, s.line,
		        s.kernel);
}
[[maybe_unused]] const int g_report = g_on_at_start ? atexit(report) : 0;

} // namespace banks
} // namespace tw_emu

extern "C" void tw_emu_set_bank_stats(int on) {
	std::lock_guard<std::mutex> l(tw_emu::banks::g_mu);
	tw_emu::banks::g_sites.clear();
	tw_emu::banks::g_on.store(on != 0);
}

extern "C" int tw_emu_bank_stats(tw_emu_bank_site *out, int max) {
	std::lock_guard<std::mutex> l(tw_emu::banks::g_mu);
	const int n = (int)tw_emu::banks::g_sites.size();
	for (int i = 0; i < n && i < max; i++) {
		const tw_emu::banks::Site &s = tw_emu::banks::g_sites[(size_t)i];
		out[i] = tw_emu_bank_site{s.kernel, s.op,    s.file,    s.line,          s.requests,
		                          s.wavefronts, s.ideal, s.sectors, s.sectors_ideal, s.lane_bytes};
	}
	return n;
}
