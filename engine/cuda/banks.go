//go:build cuda || cudaemu

package cuda

// bankSite is one call site's shared-memory traffic as the emulator counts
// it (kernels/emu/include/tw_emu_banks.h): warp instructions, the
// wavefronts they took by the model of 32 four-byte banks, and the fewest
// they could have taken (one per phase). Wavefronts above Ideal are bank
// conflicts.
type bankSite struct {
	Kernel, Op, File string
	Line             int
	Requests         uint64
	Wavefronts       uint64
	Ideal            uint64
}
