//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBundlePlant is the GPU bundle's self-check fixture, not a test of this
// package: it skips unless TW_BUNDLE_PLANT is set, and then misbehaves as
// asked, so that scripts/gpubundle/selftest.sh can show that run.sh keeps
// the other tests' results and what a step printed before it failed:
//
//	panic  panics (as a device fault does: the whole test process ends)
//	hang   prints a line, then blocks until Go's -test.timeout ends the process
//	stop   prints a line, then stops the process (SIGSTOP), so that not even
//	       Go's -test.timeout can end it (as a process stuck in the driver):
//	       only the step's kill at its limit does
func TestBundlePlant(t *testing.T) {
	plant := os.Getenv("TW_BUNDLE_PLANT")
	switch plant {
	case "":
		t.Skip("the GPU bundle's self-check fixture: runs only with TW_BUNDLE_PLANT=panic, hang or stop")
	case "panic":
		panic("bundleplant: the planted panic (TW_BUNDLE_PLANT=panic)")
	case "hang", "stop":
		// Printed straight to stdout, not by t.Log: it must reach the log
		// before the process blocks.
		fmt.Printf("bundleplant: blocking now (TW_BUNDLE_PLANT=%s)\n", plant)
		if plant == "stop" {
			if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		for {
			time.Sleep(time.Hour)
		}
	default:
		t.Fatalf("TW_BUNDLE_PLANT=%q: want panic, hang or stop", plant)
	}
}
