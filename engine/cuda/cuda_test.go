//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestConformance runs the whole op suite — every kernel, forward and
// backward, against the float64 reference — on this backend with its own
// GEMM kernel: on the CPU emulator under -tags cudaemu, on a GPU under -tags
// cuda (where the default GEMM would be cuBLASLt's; TestConformanceCUBLAS
// runs the suite with that).
func TestConformance(t *testing.T) {
	b, err := New(Options{GEMM: "own"})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, b)
}

// TestConformanceCUBLAS runs the suite with GEMM "cublas": cuBLASLt, where
// the machine has one (real GPUs only).
func TestConformanceCUBLAS(t *testing.T) {
	if !haveCUBLAS {
		t.Skip("cuBLASLt runs on real GPUs only (-tags cuda)")
	}
	b, err := New(Options{GEMM: "cublas"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.lt == nil {
		t.Skip("no cuBLASLt on this machine (see the notice above); TW_CUBLAS_PATH names where to look")
	}
	t.Logf("GEMM: %s", b.GEMMName())
	enginetest.Run(t, b)
}

// at returns a tensor of n elements of dt at byte offset off of a fresh
// buffer, holding vals.
func at(b engine.Backend, dt engine.DType, off int, vals []float32) *engine.Tensor {
	buf, err := b.NewBuffer(off + len(vals)*dt.Size())
	if err != nil {
		panic(err)
	}
	x := engine.NewTensor(buf, off, dt, len(vals))
	engine.SetF32(b, x, vals)
	return x
}

// newBackend opens a backend on device 0 with the default options.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameBits fails unless got and want are identical.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// catch runs f and returns the message of the panic it raised, or "".
func catch(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestTimerHold: a hold keeps the stream busy for at least its length (on
// the device's clock; under the emulator the host's), and a closed timer
// refuses to hold.
func TestTimerHold(t *testing.T) {
	b := newBackend(t)
	defer b.Close()
	tm, err := b.NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	const hold = 3 * time.Millisecond
	tm.Start()
	if err := tm.Hold(hold); err != nil {
		t.Fatal(err)
	}
	tm.Stop()
	if d, err := tm.Elapsed(); err != nil || d < hold {
		t.Errorf("Start, Hold(%v), Stop: Elapsed = %v, %v; want at least the hold", hold, d, err)
	}
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tm.Hold(hold); err == nil {
		t.Error("Hold on a closed timer: no error")
	}
}
