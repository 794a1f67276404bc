// Package zstdfile opens and writes the project's optionally compressed
// files: a file whose name ends in ".zst" is zstd-compressed, any other is
// read and written as it is. Trajectory files and answer files are read
// through Open, and written through Compress when compressed.
package zstdfile

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Compressed reports whether path names a zstd-compressed file: its name
// ends in ".zst".
func Compressed(path string) bool { return strings.HasSuffix(path, ".zst") }

// Open opens the file at path for reading, decompressing it when
// Compressed(path). what names the file's kind in errors ("trajectories",
// "answers"). Closing the result closes the decoder and the file.
func Open(path, what string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", what, err)
	}
	if !Compressed(path) {
		return f, nil
	}
	d, err := zstd.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	return readCloser{d, f}, nil
}

// readCloser closes the decoder and the file beneath it.
type readCloser struct {
	*zstd.Decoder
	f *os.File
}

// Close releases the decoder and closes the file.
func (z readCloser) Close() error {
	z.Decoder.Close()
	return z.f.Close()
}

// Compress writes to w, zstd-compressed, what fill writes.
func Compress(w io.Writer, fill func(io.Writer) error) error {
	zw, err := zstd.NewWriter(w)
	if err != nil {
		return err
	}
	if err := fill(zw); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}
