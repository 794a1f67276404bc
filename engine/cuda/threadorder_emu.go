//go:build cudaemu && !cuda

package cuda

// #include <cuda_runtime_api.h>
import "C"

// setReversedThreads makes the emulator run each block's threads last to
// first (on) or in order (off), as TW_EMU_REVERSE does, and reports that it
// could: tests of results that must not depend on the order of threads run
// both ways.
func setReversedThreads(on bool) bool {
	v := 0
	if on {
		v = 1
	}
	C.tw_emu_set_reverse(C.int(v))
	return true
}

// reversedThreads reports whether the emulator runs threads last to first.
func reversedThreads() bool { return C.tw_emu_reverse() != 0 }
