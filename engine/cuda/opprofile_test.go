//go:build cuda || cudaemu

package cuda

import (
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestOpProfile profiles a few ops — a GEMM (labelled with its extents), a
// fill, a copy, a replayed recording — and checks the labels, their order,
// the launches, that every op took some time and that the ops' results are
// the ones an unprofiled run gives; that what queues nothing (an empty
// copy, a GEMM with no rows) is left out; that recording is refused while
// a profile is under way; and the errors of a profile started twice or
// stopped without one.
func TestOpProfile(t *testing.T) {
	t.Setenv("TW_CUDA_SYNC", "")
	b := newBackend(t)
	defer b.Close()
	if _, err := b.StopOpProfile(); err == nil {
		t.Error("StopOpProfile without a profile succeeded")
	}
	x := engine.MustAlloc(b, engine.BF16, 3, 40)
	w := engine.MustAlloc(b, engine.BF16, 24, 40)
	y := engine.MustAlloc(b, engine.BF16, 3, 24)
	z := engine.MustAlloc(b, engine.BF16, 3, 24)
	r := enginetest.Rand(1)
	xv := enginetest.Values(r, engine.BF16, 3*40, 1)
	engine.SetF32(b, x, xv)
	engine.SetF32(b, w, enginetest.Values(r, engine.BF16, 24*40, 1))
	rec, err := b.Record(func() { b.Fill(z, 2) })
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Free()

	run := func() {
		b.Gemm(y, x, w, engine.GemmParams{TransB: true, Alpha: 1})
		b.Gemm(y.Rows(0, 0), x.Rows(0, 0), w, engine.GemmParams{TransB: true, Alpha: 1}) // no rows: nothing queued
		b.Fill(x, 0.5)
		b.Copy(z.Rows(0, 0), y.Rows(0, 0)) // nothing to copy
		b.Copy(z.Rows(0, 1), y.Rows(1, 2))
		if err := rec.Replay(); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := engine.ProfileOps(b, func() error {
		if err := b.StartOpProfile(); err == nil {
			t.Error("a second StartOpProfile succeeded")
		}
		if _, err := b.Record(func() {}); err == nil || !strings.Contains(err.Error(), "op profile") {
			t.Errorf("Record while profiling: error %v, want one naming the profile", err)
		}
		run()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op, extents string
		launches    int64
	}{{"Gemm", "3×24×40", 1}, {"Fill", "", 1}, {"Copy", "", 1}, {"Replay", "", 1}}
	if len(ops) != len(want) {
		t.Fatalf("profiled %d ops %v, want %d", len(ops), ops, len(want))
	}
	for i, o := range ops {
		if o.Op != want[i].op || o.Extents != want[i].extents || o.Launches != want[i].launches || (o.Op == "Gemm") != (o.FLOPs == 2*3*24*40 && o.Bytes == 2*(3*40+24*40+3*24)) {
			t.Errorf("op %d: %q %q with %d launches, %v FLOPs, %d bytes; want %q %q with %d (FLOPs and bytes for the GEMM)", i, o.Op, o.Extents, o.Launches, o.FLOPs, o.Bytes,
				want[i].op, want[i].extents, want[i].launches)
		}
		if o.Time <= 0 {
			t.Errorf("op %d (%s): time %v, want > 0", i, o.Op, o.Time)
		}
	}
	got := engine.ToF32(b, y)
	engine.SetF32(b, x, xv)
	b.Gemm(y, x, w, engine.GemmParams{TransB: true, Alpha: 1})
	sameBits(t, "profiled GEMM", got, engine.ToF32(b, y))

	// The events are reused: a second profile works, and after it the
	// backend records again. Its op is held first (the device clock runs
	// firstHold before it), and the hold is not the op's time.
	// The fill and the hold both fit in the wall time around them, one after
	// the other (a fill timed with its hold would take the hold twice).
	t0 := time.Now()
	ops, err = engine.ProfileOps(b, func() error { b.Fill(x, 1); return nil })
	if err != nil || len(ops) != 1 || ops[0].Op != "Fill" {
		t.Fatalf("second profile: %v, %v; want one Fill", ops, err)
	}
	if d := time.Since(t0); d < firstHold || ops[0].Time+firstHold > d {
		t.Errorf("a profile of one fill took %v, the fill %v: want the hold of %v before it, not in it", d, ops[0].Time, firstHold)
	}
	if r, err := b.Record(func() { b.Fill(x, 1) }); err != nil {
		t.Errorf("Record after the profile: %v", err)
	} else {
		r.Free()
	}
	// A panicking op ends the profile and becomes its error.
	if _, err := engine.ProfileOps(b, func() error { b.Copy(x, y); return nil }); err == nil || !strings.Contains(err.Error(), "Copy") {
		t.Errorf("profile of a failing op: error %v, want the op's", err)
	}
	if err := b.StartOpProfile(); err != nil {
		t.Errorf("StartOpProfile after a failed profile: %v", err)
	}
	if _, err := b.StopOpProfile(); err != nil {
		t.Error(err)
	}
}

// TestOpProfileHold checks the holds' lengths: half as long again as the
// host took to queue the ops since the last hold, within [minHold, maxHold],
// and none pending after a synchronisation. The time the host took is what
// the test set plus however long it took to reach the synchronisation, which
// the wall clock around it bounds (a loaded machine may take milliseconds).
func TestOpProfileHold(t *testing.T) {
	b := newBackend(t)
	defer b.Close()
	if err := b.StartOpProfile(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ queued, want time.Duration }{
		{10 * time.Millisecond, 15 * time.Millisecond},
		{time.Second, maxHold},
		{0, minHold},
	} {
		t0 := time.Now()
		b.prof.held, b.prof.heldAt = true, t0.Add(-c.queued)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		// The hold for the longest the host can have taken.
		most := min(max((c.queued+time.Since(t0))*3/2, minHold), maxHold)
		if got := b.prof.hold; b.prof.held || got < c.want || got > most {
			t.Errorf("after %v queued: held %v, next hold %v; want not held and in [%v, %v]", c.queued, b.prof.held, got, c.want, most)
		}
	}
	if _, err := b.StopOpProfile(); err != nil {
		t.Fatal(err)
	}
}
