//go:build cuda || cudaemu

package cuda

import "unsafe"

// device is what differs between a real GPU and the emulator: memory, the
// stream kernels are queued on, and waiting for it. Addresses are device
// addresses held as integers (never dereferenced by Go).
type device interface {
	kind() string // "cuda" or "cudaemu"
	ordinal() int
	alloc(n int) (uintptr, error)
	free(a uintptr)
	memset0(a uintptr, n int) error
	upload(dst uintptr, src []byte) error
	download(dst []byte, src uintptr) error
	copy(dst, src uintptr, n int) error
	stream() unsafe.Pointer // the cudaStream_t launchers receive
	sync() error
}
