// tw_emu_banks.h — the emulator's count of shared-memory bank conflicts, for
// the accesses it sees a warp make together: ldmatrix, the shared side of
// cp.async, and the loads and stores kernels make through ld_shared,
// st_shared (kernels/sm80.cuh) and the pack helpers. tw_emu.h includes it;
// kernels/emu/banks.cpp holds the counting; the host API
// (tw_emu_set_bank_stats, tw_emu_bank_stats) is in cuda_runtime_api.h.
//
// The model: 32 banks of 4 bytes, successive words in successive banks,
// lanes asking for the same word served at once (as the CUDA C++
// Programming Guide documents shared memory from compute capability 5.x
// on); a warp's request served in phases of at most 128 bytes — for 16-byte
// accesses each quarter warp (lanes 8q…8q+7), for 8-byte ones each half
// warp, for 4-byte ones the warp — and ldmatrix reading each 8×8 matrix
// (its 8 rows of 16 bytes) in one phase, which is how NVIDIA describes the
// wider accesses and ldmatrix but not a specification: a profiler's shared
// wavefront counters on a GPU are the check. A phase takes as many
// wavefronts as the most distinct words any one bank is asked for, so 1
// when it is conflict-free; the ideal is one wavefront per phase that has
// an access.
// A warp's cp.async is also counted in the 32-byte sectors of global memory
// its lanes' copies read (a copy of 0 bytes reads none), beside the fewest
// sectors that could hold the bytes read (their union, rounded up to whole
// sectors): above that, the copy fetches sectors it uses only in part —
// lanes reading scattered 16-byte chunks, or rows not 32-byte aligned — and
// since cp.async.cg reads from L2, a sector two instructions share part of
// is fetched twice. So are the loads and stores of global memory that
// kernels make through the pack helpers (kernels/pack.cuh's ld_held,
// load_pack, put_pack, store_pack; vec.cuh's ld, st: "ld.global",
// "st.global"), with the bytes each lane moves.
//
// Not modelled: other loads and stores of shared memory (the emulator does
// not see them as a warp's), and the order in which the hardware pairs lanes
// into phases beyond the rule above.
//
// Counting is off unless TW_EMU_BANKS=1 (which also prints the table to
// stderr at exit) or tw_emu_set_bank_stats(1); off, each hook is one load.
#ifndef TW_EMU_BANKS_H
#define TW_EMU_BANKS_H

#include <stdint.h>

#include <atomic>

namespace tw_emu {
namespace banks {

// Whether counting is on: one relaxed load, inline, since every hook asks.
inline std::atomic<bool> g_on{false}; // set at start-up from TW_EMU_BANKS (banks.cpp)
inline bool on() { return g_on.load(std::memory_order_relaxed); }
// One warp instruction that reads rows of 16 bytes, 8 per phase: row[i] for
// i < n (n a multiple of 8) is the address of row i%8 of phase i/8.
void rows16(const char *op, const uintptr_t *row, int n, const char *file, int line);
// One thread's access op of size bytes at addr in shared memory (size 0:
// none) and of global_size bytes at global in global memory (0: none):
// cp.async does both, st.shared.b32 the first, the pack helpers' loads and
// stores of global memory the second. The accesses of a warp's lanes that
// are each lane's k-th at the same call site are taken as one instruction,
// counted when the block ends: its shared part in wavefronts, its global
// part in the 32-byte sectors it touches, beside the fewest that hold
// those bytes.
void thread_access(const char *op, uintptr_t addr, int size, const void *global, int global_size, const char *file,
                   int line);

} // namespace banks
} // namespace tw_emu

#endif // TW_EMU_BANKS_H
