package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeProfiler is a backend whose op profile returns ops, counting the
// profiles started and stopped.
type fakeProfiler struct {
	Backend
	startErr        error
	started, closed int
	ops             []OpTime
}

func (f *fakeProfiler) StartOpProfile() error {
	if f.startErr != nil {
		return f.startErr
	}
	f.started++
	return nil
}

func (f *fakeProfiler) StopOpProfile() ([]OpTime, error) {
	f.closed++
	return f.ops, nil
}

// TestProfileOps checks ProfileOps' paths: a backend that cannot profile, a
// profile that cannot start, fn's error and panic (each ends the profile),
// and the ops of a profile that ran.
func TestProfileOps(t *testing.T) {
	type plain struct{ Backend }
	if _, err := ProfileOps(plain{}, func() error { return nil }); !errors.Is(err, ErrNoOpProfiler) {
		t.Errorf("a backend without a profiler: error %v, want ErrNoOpProfiler", err)
	}
	ran := false
	f := &fakeProfiler{startErr: errors.New("busy")}
	if _, err := ProfileOps(f, func() error { ran = true; return nil }); err == nil || ran {
		t.Errorf("a profile that cannot start: error %v, fn ran %v; want the error and fn not run", err, ran)
	}
	ops := []OpTime{{Op: "Gemm", Extents: "2×3×4", Time: time.Microsecond, Launches: 1}}
	for _, c := range []struct {
		name    string
		fn      func() error
		wantErr string
	}{
		{"ok", func() error { return nil }, ""},
		{"error", func() error { return errors.New("out of memory") }, "out of memory"},
		{"panic", func() error { panic("cuda: Gemm: launch failed") }, "launch failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeProfiler{ops: ops}
			got, err := ProfileOps(f, c.fn)
			if f.started != 1 || f.closed != 1 {
				t.Errorf("profiles started %d, stopped %d; want 1 and 1", f.started, f.closed)
			}
			if c.wantErr == "" {
				if err != nil || len(got) != 1 || got[0] != ops[0] {
					t.Errorf("got %v, %v; want %v", got, err, ops)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || got != nil {
				t.Errorf("got %v, error %v; want no ops and an error containing %q", got, err, c.wantErr)
			}
		})
	}
}
