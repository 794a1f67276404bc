//go:build cudaemu && !cuda

package cuda

// #include <cuda_runtime_api.h>
import "C"

import "unsafe"

// countBanks runs f with the emulator counting bank conflicts and returns
// what f's kernels did, by call site, and true. Builds for a GPU return
// false (banks_cuda.go): there the profiler counts them.
func countBanks(f func()) ([]bankSite, bool) {
	C.tw_emu_set_bank_stats(1)
	defer C.tw_emu_set_bank_stats(0)
	f()
	n := int(C.tw_emu_bank_stats(nil, 0))
	if n == 0 {
		return nil, true
	}
	sites := make([]C.tw_emu_bank_site, n)
	n = min(n, int(C.tw_emu_bank_stats(unsafe.SliceData(sites), C.int(n))))
	out := make([]bankSite, n)
	for i, s := range sites[:n] {
		out[i] = bankSite{
			Kernel: C.GoString(s.kernel), Op: C.GoString(s.op), File: C.GoString(s.file), Line: int(s.line),
			Requests: uint64(s.requests), Wavefronts: uint64(s.wavefronts), Ideal: uint64(s.ideal),
			Sectors: uint64(s.sectors), SectorsIdeal: uint64(s.sectors_ideal), LaneBytes: int(s.lane_bytes),
		}
	}
	return out, true
}
