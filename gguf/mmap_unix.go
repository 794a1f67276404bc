//go:build unix

package gguf

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps size bytes of fd read-only into memory.
func mapFile(fd *os.File, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %d bytes: %w", size, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
