//go:build cuda || cudaemu

package cuda

// bankSite is one call site's shared-memory traffic as the emulator counts
// it (kernels/emu/include/tw_emu_banks.h): warp instructions, the
// wavefronts they took by the model of 32 four-byte banks, and the fewest
// they could have taken (one per phase) — wavefronts above Ideal are bank
// conflicts; for cp.async also the 32-byte sectors of global memory the
// copies read and the fewest that hold the bytes they read.
type bankSite struct {
	Kernel, Op, File string
	Line             int
	Requests         uint64
	Wavefronts       uint64
	Ideal            uint64
	Sectors          uint64
	SectorsIdeal     uint64
	LaneBytes        int // the fewest bytes one lane moved in one access
}
