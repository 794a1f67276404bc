//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads size bytes of fd into memory, on platforms without mmap.
func mapFile(fd *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, nil, fmt.Errorf("reading %d bytes: %w", size, err)
	}
	return data, func() error { return nil }, nil
}
