package metrics

import (
	"runtime"
	"time"
)

// Keys of the performance values every trainer records (see Meter).
const (
	WallS         = "wall_s"             // seconds since the run (this process) started
	MFU           = "mfu"                // model FLOP utilisation, in [0, 1]
	PoolPeakBytes = "pool_peak_bytes"    // the engine pool's most bytes in use plus cached
	PoolHighWater = "pool_high_water"    // the engine pool's most bytes its live tensors asked for
	GoHeapBytes   = "go_heap_peak_bytes" // the most Go heap bytes seen at a step's end
	GoSysBytes    = "go_sys_bytes"       // bytes the Go runtime holds from the OS
)

// TrainFLOPsPerToken returns the model FLOPs one training token costs on
// a transformer whose matrix multiplications touch frozen weights that
// stay fixed and trained weights that are updated:
//
//	4·frozen + 6·trained
//
// A weight costs 2 FLOPs a token forward (a multiply and an add), 2 more
// for the gradient of its input and 2 for its own gradient; a frozen
// weight (the base under a LoRA adapter) still costs the forward and the
// input gradient, which the adapter's gradient needs. Full fine-tuning
// (frozen 0) is the usual 6·N. Attention's score and value products, which
// grow with the context, are not counted, as in the usual 6·N.
func TrainFLOPsPerToken(frozen, trained int64) float64 {
	return 4*float64(frozen) + 6*float64(trained)
}

// MFUOf returns the model FLOP utilisation of a step that trained tokens
// tokens in seconds seconds at flopsPerToken each, against a peak of
// peakFLOPS per second: tokens·flopsPerToken / (seconds·peakFLOPS). It is
// 0 when the peak or the time is not positive.
func MFUOf(tokens int, seconds, flopsPerToken, peakFLOPS float64) float64 {
	if peakFLOPS <= 0 || seconds <= 0 {
		return 0
	}
	return float64(tokens) * flopsPerToken / (seconds * peakFLOPS)
}

// MeterOptions control a Meter.
type MeterOptions struct {
	// FLOPsPerToken is the model FLOPs a training token costs
	// (TrainFLOPsPerToken); 0 leaves MFU out.
	FLOPsPerToken float64
	// PeakFLOPS is the hardware's peak FLOP/s: for a GPU its data-sheet
	// dense bf16 peak (bench.SpecPeak lists the known ones), for the CPU
	// the matrix-multiplication rate `train bench` measures. 0, as for a
	// device whose peak is unknown, leaves MFU out rather than guess it.
	PeakFLOPS float64
	// Pool returns the engine pool's peak bytes (in use plus cached) and
	// high-water mark of requested bytes; nil leaves them out.
	Pool func() (peak, highWater int)
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Meter adds a trainer's performance values to its step records:
// TokensPerS, WallS, MFU (when a peak and a FLOP count are known), the
// engine pool's peaks and the Go heap's. It is not safe for concurrent
// use.
type Meter struct {
	o        MeterOptions
	start    time.Time
	heapPeak uint64
}

// NewMeter returns a Meter whose wall clock starts now.
func NewMeter(o MeterOptions) *Meter {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Meter{o: o, start: o.Now()}
}

// Add records into vals the performance of a step that trained tokens
// tokens in seconds seconds.
func (m *Meter) Add(vals map[string]float64, tokens int, seconds float64) {
	if seconds > 0 {
		vals[TokensPerS] = float64(tokens) / seconds
	}
	vals[WallS] = m.o.Now().Sub(m.start).Seconds()
	if m.o.FLOPsPerToken > 0 && m.o.PeakFLOPS > 0 && seconds > 0 {
		vals[MFU] = MFUOf(tokens, seconds, m.o.FLOPsPerToken, m.o.PeakFLOPS)
	}
	if m.o.Pool != nil {
		peak, hw := m.o.Pool()
		vals[PoolPeakBytes] = float64(peak)
		vals[PoolHighWater] = float64(hw)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapPeak = max(m.heapPeak, ms.HeapAlloc)
	vals[GoHeapBytes] = float64(m.heapPeak)
	vals[GoSysBytes] = float64(ms.Sys)
}
