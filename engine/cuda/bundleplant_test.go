//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestBundlePlant is the GPU bundle's self-check fixture, not a test of this
// package: it skips unless TW_BUNDLE_PLANT is set, and then misbehaves as
// asked, so that scripts/gpubundle/selftest.sh can show that run.sh keeps
// the other tests' results and what a step printed before it failed:
//
//	panic  panics (as a device fault does: the whole test process ends)
//	hang   prints a line, then blocks until Go's -test.timeout or the kill at
//	       the step's limit ends the process
func TestBundlePlant(t *testing.T) {
	plant := os.Getenv("TW_BUNDLE_PLANT")
	switch plant {
	case "":
		t.Skip("the GPU bundle's self-check fixture: runs only with TW_BUNDLE_PLANT=panic or hang")
	case "panic":
		panic("bundleplant: the planted panic (TW_BUNDLE_PLANT=panic)")
	case "hang":
		// Printed straight to stdout, not by t.Log: it must reach the log
		// before the process blocks.
		fmt.Println("bundleplant: blocking now (TW_BUNDLE_PLANT=hang)")
		for {
			time.Sleep(time.Hour)
		}
	default:
		t.Fatalf("TW_BUNDLE_PLANT=%q: want panic or hang", plant)
	}
}
