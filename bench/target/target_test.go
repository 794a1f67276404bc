package target

import (
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
)

func TestTracker(t *testing.T) {
	tg, err := Open(Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := Track(tg.Backend)
	a := engine.MustAlloc(tr, engine.F32, 256) // 1 KiB
	b := engine.MustAlloc(tr, engine.BF16, 1024)
	if tr.InUse() != 3072 || tr.Peak() != 3072 {
		t.Errorf("in use %d, peak %d; want 3072, 3072", tr.InUse(), tr.Peak())
	}
	tr.FreeBuffer(b.Buffer())
	tr.ResetPeak()
	if tr.InUse() != 1024 || tr.Peak() != 1024 {
		t.Errorf("after a free and a reset: in use %d, peak %d; want 1024, 1024", tr.InUse(), tr.Peak())
	}
	// Ops go to the wrapped backend.
	tr.Fill(a, 2)
	if v := engine.ToF32(tr, a); v[255] != 2 {
		t.Errorf("Fill through the tracker: %v", v[255])
	}
	engine.MustAlloc(tr, engine.F32, 10)
	tr.FreeAll()
	if tr.InUse() != 0 {
		t.Errorf("after FreeAll: %d bytes in use", tr.InUse())
	}
}

func TestHostTimer(t *testing.T) {
	tg, err := Open(Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := tg.NewTimer(tg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	tm.Start()
	time.Sleep(2 * time.Millisecond)
	tm.Stop()
	if d, err := tm.Elapsed(); err != nil || d < 2*time.Millisecond {
		t.Errorf("elapsed %v, %v; want at least the 2 ms slept", d, err)
	}
	if tg.Device == "" || tg.CacheBytes <= 0 || tg.Threads != 1 {
		t.Errorf("target %+v", tg)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"32768K": 32 << 20, "1M": 1 << 20, "512": 512, "x": 0} {
		if got := parseSize(in); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestUnknownBackend(t *testing.T) {
	if _, err := Open(Options{Backend: "tpu"}); err == nil {
		t.Error("opening a tpu backend succeeded")
	}
}

// driverVersionLines are /proc/driver/nvidia/version texts and the version
// in each.
var driverVersionLines = []struct{ Text, Want string }{
	{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:38 UTC 2025\nGCC version:  gcc version 12.2.0", "580.65.06"},
	{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\n", "580.159.04"},
	{"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build", "570.86.15"},
	{"NVRM version: nothing to see", ""},
	{"", ""},
}

func TestParseDriverVersion(t *testing.T) {
	for _, c := range driverVersionLines {
		if got := parseDriverVersion(c.Text); got != c.Want {
			t.Errorf("parseDriverVersion(%q) = %q, want %q", c.Text, got, c.Want)
		}
	}
}
