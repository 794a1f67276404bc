//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of fd read-only into memory, or reads them where
// the file system cannot be mapped.
func mapFile(fd *os.File, size int) ([]byte, func() error, error) {
	buf, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readFile(fd, size)
	}
	return buf, func() error { return syscall.Munmap(buf) }, nil
}
