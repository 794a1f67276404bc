// test_banks.cu — the emulator's count of shared-memory bank conflicts
// (include/tw_emu_banks.h) against the model's definition, on access
// patterns whose wavefronts are known by hand: rows of a tile at strides that
// put 1, 2, 4 or 8 of a phase's rows on the same banks, a row read by every
// lane, a swizzled tile, and cp.async and st_shared_b32 at contiguous and
// strided destinations. Emulator only (a GPU's counters are the
// profiler's).
#include "../../common.cuh"
#include "../../sm80.cuh"
#include "harness.h"

#ifdef TW_EMU

// Every lane passes to ldmatrix.x4 the row (lane) of a tile whose rows are
// stride bytes apart; with swizzle, the 16-byte chunk of row r is stored at
// chunk (r % 8) of the row (a tile of 8 chunks a row, the XOR swizzle).
__global__ void ldmatrix_rows(int stride, int swizzle, int same_row, uint32_t *out) {
	extern __shared__ unsigned char smem[];
	const int l = threadIdx.x, row = same_row ? 0 : l;
	const int chunk = swizzle ? (row % 8) : 0;
	for (int i = l; i < 32 * stride / 4; i += 32) reinterpret_cast<uint32_t *>(smem)[i] = (uint32_t)i;
	__syncthreads();
	uint32_t r[4];
	ldmatrix_x4(r, smem + row * stride + chunk * 16);
	out[l] = r[0] ^ r[1] ^ r[2] ^ r[3];
}

// Every thread copies 16 bytes (or 4) from byte t·from of src to
// destination t·stride.
__global__ void copy_rows(const uint32_t *src, int from, int stride, int size, int times) {
	extern __shared__ unsigned char smem[];
	const int t = threadIdx.x;
	const unsigned char *s = reinterpret_cast<const unsigned char *>(src) + t * from;
	for (int k = 0; k < times; k++) {
		if (size == 16) cp_async16(smem + t * stride, s, 16);
		else tw_emu::cp_async(smem + t * stride, s, 4, 4);
	}
	cp_async_commit();
	cp_async_wait<0>();
}

// Every thread stores one word at byte t·stride.
__global__ void store_words(int stride) {
	extern __shared__ unsigned char smem[];
	st_shared_b32(smem + threadIdx.x * stride, threadIdx.x);
}

struct Totals {
	unsigned long long requests, wavefronts, ideal, sectors, sectors_ideal;
	int sites;
};

// Counts what f launches.
template <class F> Totals count(F f) {
	tw_emu_set_bank_stats(1);
	f();
	cudaDeviceSynchronize();
	tw_emu_bank_site s[16];
	const int n = tw_emu_bank_stats(s, 16);
	tw_emu_set_bank_stats(0);
	Totals t{0, 0, 0, 0, 0, n};
	for (int i = 0; i < n && i < 16; i++) {
		t.requests += s[i].requests;
		t.wavefronts += s[i].wavefronts;
		t.ideal += s[i].ideal;
		t.sectors += s[i].sectors;
		t.sectors_ideal += s[i].sectors_ideal;
	}
	return t;
}

EMU_TEST(banks_ldmatrix) {
	DeviceBuf<uint32_t> out(32);
	const struct {
		const char *name;
		int stride, swizzle, same_row;
		unsigned long long wavefronts; // of the four phases together
	} cases[] = {
		{"rows 16 bytes apart (one 128-byte line a phase)", 16, 0, 0, 4},
		{"rows 32 bytes apart (2 a bank)", 32, 0, 0, 8},
		{"rows 64 bytes apart (4 a bank)", 64, 0, 0, 16},
		{"rows 128 bytes apart (8 a bank)", 128, 0, 0, 32},
		{"rows 144 bytes apart (padded by 16)", 144, 0, 0, 4},
		{"rows 128 bytes apart, swizzled", 128, 1, 0, 4},
		{"one row for every lane", 128, 0, 1, 4},
	};
	for (const auto &c : cases) {
		const Totals t = count([&] { LAUNCH(1, 32, 32 * c.stride, 0, ldmatrix_rows)(c.stride, c.swizzle, c.same_row, out.p); });
		CHECKF(t.sites == 1 && t.requests == 1 && t.ideal == 4 && t.wavefronts == c.wavefronts,
		       "%s: %d sites, %llu requests, %llu wavefronts (want %llu), ideal %llu", c.name, t.sites, t.requests,
		       t.wavefronts, c.wavefronts, t.ideal);
	}
}

EMU_TEST(banks_cp_async) {
	DeviceBuf<uint32_t> src(32 * 64 / 4); // 64 bytes a lane at most
	const struct {
		const char *name;
		int from, stride, size, times;
		unsigned long long requests, wavefronts, ideal, sectors, sectors_ideal;
	} cases[] = {
		{"16 bytes a lane, contiguous", 16, 16, 16, 1, 1, 4, 4, 16, 16},
		{"16 bytes a lane, 32 apart (2 a bank)", 16, 32, 16, 1, 1, 8, 4, 16, 16},
		{"16 bytes a lane, 128 apart (8 a bank)", 16, 128, 16, 1, 1, 32, 4, 16, 16},
		{"16 bytes a lane, 144 apart (padded)", 16, 144, 16, 1, 1, 4, 4, 16, 16},
		{"4 bytes a lane, contiguous", 4, 4, 4, 1, 1, 1, 1, 4, 4},
		{"4 bytes a lane, 8 apart (2 a bank)", 4, 8, 4, 1, 1, 2, 1, 4, 4},
		{"three copies a lane at one site: three instructions", 16, 16, 16, 3, 3, 12, 12, 48, 48},
		{"16 bytes from every 32 (half of each sector)", 32, 16, 16, 1, 1, 4, 4, 32, 16},
		{"16 bytes from every 64", 64, 16, 16, 1, 1, 4, 4, 32, 16},
		{"every lane the same 16 bytes", 0, 16, 16, 1, 1, 4, 4, 1, 1},
	};
	for (const auto &c : cases) {
		const Totals t =
			count([&] { LAUNCH(1, 32, 32 * c.stride, 0, copy_rows)(src.p, c.from, c.stride, c.size, c.times); });
		CHECKF(t.sites == 1 && t.requests == c.requests && t.wavefronts == c.wavefronts && t.ideal == c.ideal &&
		           t.sectors == c.sectors && t.sectors_ideal == c.sectors_ideal,
		       "%s: %d sites, %llu requests (want %llu), %llu wavefronts (want %llu), ideal %llu (want %llu), "
		       "%llu sectors (want %llu), ideal %llu (want %llu)",
		       c.name, t.sites, t.requests, c.requests, t.wavefronts, c.wavefronts, t.ideal, c.ideal, t.sectors,
		       c.sectors, t.sectors_ideal, c.sectors_ideal);
	}
	// Two warps: each warp's lanes are one instruction.
	const Totals t = count([&] { LAUNCH(1, 64, 64 * 16, 0, copy_rows)(src.p, 16, 16, 16, 1); });
	CHECKF(t.requests == 2 && t.wavefronts == 8 && t.ideal == 8 && t.sectors == 32 && t.sectors_ideal == 32,
	       "two warps: %llu requests, %llu wavefronts, ideal %llu, %llu sectors, ideal %llu", t.requests, t.wavefronts,
	       t.ideal, t.sectors, t.sectors_ideal);
}

EMU_TEST(banks_st_shared) {
	const struct {
		int stride;
		unsigned long long wavefronts;
	} cases[] = {{4, 1}, {8, 2}, {128, 32}, {132, 1}};
	for (const auto &c : cases) {
		const Totals t = count([&] { LAUNCH(1, 32, 32 * c.stride, 0, store_words)(c.stride); });
		CHECKF(t.requests == 1 && t.ideal == 1 && t.wavefronts == c.wavefronts,
		       "words %d bytes apart: %llu requests, %llu wavefronts (want %llu), ideal %llu", c.stride, t.requests,
		       t.wavefronts, c.wavefronts, t.ideal);
	}
}

// Off, nothing is counted.
EMU_TEST(banks_off) {
	DeviceBuf<uint32_t> out(32);
	tw_emu_set_bank_stats(1);
	tw_emu_set_bank_stats(0);
	LAUNCH(1, 32, 32 * 128, 0, ldmatrix_rows)(128, 0, 0, out.p);
	cudaDeviceSynchronize();
	tw_emu_bank_site s[1];
	CHECK(tw_emu_bank_stats(s, 1) == 0);
}

#endif
