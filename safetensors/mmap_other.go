//go:build !unix

package safetensors

import "os"

// mapFile reads size bytes of fd into memory, on platforms without mmap.
func mapFile(fd *os.File, size int) ([]byte, func() error, error) {
	return readFile(fd, size)
}
