//go:build cuda || cudaemu

package llama_test

import (
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

// TestStories260KGreedyCUDA decodes stories260K with the CUDA kernels: on the
// CPU emulator under -tags cudaemu, on a GPU under -tags cuda.
func TestStories260KGreedyCUDA(t *testing.T) {
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := greedyStories(t, b, engine.F32)
	if !strings.HasPrefix(got, storiesText) {
		t.Errorf("greedy decoding from BOS:\n got %q\nwant %q…", got, storiesText)
	}
}
