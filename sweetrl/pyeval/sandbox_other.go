//go:build !linux

package pyeval

import (
	"context"
	"errors"
	"time"
)

// notLinux is what the evaluator says on systems other than Linux, whose
// process isolation it relies on.
const notLinux = "the sandboxed Python evaluator needs Linux"

// sandbox is a stand-in on systems other than Linux.
type sandbox struct {
	isolation Isolation
}

// probeInfo is what the harness says about its interpreter.
type probeInfo struct {
	executable string
	version    string
}

// newSandbox fails: the sandbox needs Linux.
func newSandbox(ctx context.Context, opts Options) (*sandbox, probeInfo, error) {
	return nil, probeInfo{}, errors.New(notLinux)
}

// run fails: the sandbox needs Linux.
func (sb *sandbox) run(ctx context.Context, mode string, input []byte, wall time.Duration, uid int) (outcome, error) {
	return outcome{}, errors.New(notLinux)
}

// close does nothing: there is nothing to release.
func (sb *sandbox) close() error { return nil }
