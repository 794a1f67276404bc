// Package target opens the backend a benchmark runs on together with what
// measuring it needs: a timer on the backend's own clock, the device's name,
// versions and last-level cache size, its memory, and, where one exists, a
// second backend whose GEMM is the vendor library, to compare ours with.
package target

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// Timer measures the time between two points of a backend's queue of work:
// device time for a GPU (CUDA events on its stream), host time for the CPU.
type Timer interface {
	// Start marks the beginning; Stop marks the end, after the work queued
	// since Start.
	Start()
	Stop()
	// Elapsed waits for the end mark and returns the time between the two.
	Elapsed() (time.Duration, error)
	// Close releases the timer.
	Close() error
}

// Holder is a Timer whose device can be kept busy: Hold(d) queues a wait of
// d on the device ahead of the work queued after it, so that the host can
// queue a run of short calls before the device reaches the first and the
// calls then run back to back (engine/cuda's Timer). The CPU's host-clock
// timer is not one: its queue is the host.
type Holder interface {
	Timer
	Hold(d time.Duration) error
}

// Target is a backend ready to be measured.
type Target struct {
	// Backend runs everything but the GEMM kernels of the kernel suite: the
	// other kernels and the model steps, with the GEMM GEMMName names.
	Backend engine.Backend
	// GEMMName is the GEMM Backend runs ("own", "cublaslt 13.1.0 (…)",
	// "openblas"), recorded in the results.
	GEMMName string
	// Own runs the kernel suite's GEMMs of ours: a backend whose GEMM is
	// turnwise's own kernel (Backend itself when that is its GEMM).
	Own engine.Backend
	// NewTimer returns a timer on the queue of b, Backend, Own or Vendor.
	NewTimer func(b engine.Backend) (Timer, error)
	// TimerName says how Timer measures, for the results.
	TimerName string
	Device    string // the GPU's or CPU's name
	Driver    string // GPU driver version
	Toolkit   string // the CUDA toolkit the binary was built with
	// CacheBytes is the last-level cache (a GPU's L2) that benchmark inputs
	// must be rotated past; 0 when there is none to defeat (the emulator).
	CacheBytes  int64
	MemoryBytes int64
	Threads     int // CPU worker threads (CPU only)
	// Vendor runs the same ops with the vendor's GEMM (cuBLASLt), nil when
	// there is none; VendorName is its name in results and VendorNote says
	// why it is missing.
	Vendor     engine.Backend
	VendorName string
	VendorNote string
	// MemInfo reports the device's free and total memory; nil when the
	// device cannot say.
	MemInfo func() (free, total int64, err error)
	// Notes are things a reader of the results must know.
	Notes []string
	// closers release the backends and what describing the device took.
	closers []func() error
}

// Close releases the target's backends.
func (t *Target) Close() error {
	var first error
	for _, c := range t.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	t.closers = nil
	return first
}

// Options select the backend.
type Options struct {
	Backend string // "cpu" or "cuda" (a GPU, or the emulator in a -tags cudaemu build)
	// GEMM is the cuda backend's GEMM for everything but the kernel suite's
	// own GEMMs: "cublas", "own", or "" for the backend's default (cuBLASLt
	// where one is found). The CPU backend has one GEMM and takes only "".
	GEMM string
	// Attention is the cuda backend's attention tile configuration, as
	// cuda.ParseAttentionConfig reads it ("": the kernels' defaults).
	Attention string
	Threads   int // CPU worker threads (0: one per CPU)
	Device    int // GPU ordinal
}

// Open returns the target o names.
func Open(o Options) (*Target, error) {
	switch o.Backend {
	case "cpu":
		if o.GEMM != "" {
			return nil, fmt.Errorf("GEMM %q: the cpu backend has one GEMM (OpenBLAS)", o.GEMM)
		}
		if o.Attention != "" {
			return nil, fmt.Errorf("attention config %q: the cpu backend has no attention tiles to set", o.Attention)
		}
		return openCPU(o), nil
	case "cuda":
		return openCUDA(o)
	}
	return nil, fmt.Errorf("unknown backend %q (want cpu or cuda)", o.Backend)
}

// openCPU opens the CPU backend, its ops timed on the host's clock in a
// profile (engine.TimeOnHost: they are done when they return).
func openCPU(o Options) *Target {
	b := cpu.New(cpu.Options{Threads: o.Threads})
	t := &Target{
		Backend:    engine.TimeOnHost(b),
		GEMMName:   "openblas",
		Own:        b,
		TimerName:  "host clock",
		Device:     cpuModel(),
		CacheBytes: lastLevelCache(),
		Threads:    b.Threads(),
		VendorNote: "the CPU backend's GEMM is OpenBLAS itself",
	}
	t.NewTimer = hostTimers
	return t
}

// hostTimers returns a host-clock timer of b.
func hostTimers(b engine.Backend) (Timer, error) { return &hostTimer{b: b}, nil }

// hostTimer times with the host clock, waiting for the backend's queue at
// both marks: exact for the CPU backend, whose ops return when done; for a
// GPU it adds the cost of one synchronisation to each measurement.
type hostTimer struct {
	b          engine.Backend
	start, end time.Time
	err        error
}

func (t *hostTimer) Start() {
	t.err = t.b.Sync()
	t.start = time.Now()
}

func (t *hostTimer) Stop() {
	if err := t.b.Sync(); err != nil && t.err == nil {
		t.err = err
	}
	t.end = time.Now()
}

func (t *hostTimer) Elapsed() (time.Duration, error) { return t.end.Sub(t.start), t.err }

func (t *hostTimer) Close() error { return nil }

// cpuModel returns the CPU's model name from /proc/cpuinfo, or "cpu".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "cpu"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu"
}

// lastLevelCache returns the size of CPU 0's largest cache from sysfs, or
// 32 MiB when it cannot be read.
func lastLevelCache() int64 {
	best := int64(0)
	for i := 0; i < 8; i++ {
		raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i))
		if err != nil {
			break
		}
		if n := parseSize(strings.TrimSpace(string(raw))); n > best {
			best = n
		}
	}
	if best == 0 {
		return 32 << 20
	}
	return best
}

// parseDriverVersion returns the first version number after "Module" in
// the text of /proc/driver/nvidia/version ("… Kernel Module  580.65.06 …",
// or "… Open Kernel Module for x86_64  580.159.04 …"), or "".
func parseDriverVersion(text string) string {
	w := strings.Fields(text)
	i := slices.Index(w, "Module")
	if i < 0 {
		return ""
	}
	for _, v := range w[i+1:] {
		if isVersion(v) {
			return v
		}
	}
	return ""
}

// isVersion reports whether s is dot-separated decimal numbers, two or more.
func isVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// parseSize reads sysfs cache sizes such as "32768K" or "1M".
func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n * mult
}
