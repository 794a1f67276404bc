//go:build cuda

package cuda

// setReversedThreads reports false: a GPU's thread order is its own (see
// threadorder_emu.go).
func setReversedThreads(on bool) bool { return false }

// reversedThreads reports false on a GPU.
func reversedThreads() bool { return false }
