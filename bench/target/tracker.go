package target

import (
	"github.com/turnwise/turnwise/engine"
)

// Tracker is a backend that counts the device memory allocated through it:
// the bytes held now, their high-water mark, and every buffer, so that a
// benchmark can free all it allocated. Every op goes to the wrapped backend.
// Like a Backend, it is not safe for concurrent use.
type Tracker struct {
	engine.Backend
	live  map[engine.Buffer]int64
	inUse int64
	peak  int64
}

// Track wraps b.
func Track(b engine.Backend) *Tracker {
	return &Tracker{Backend: b, live: map[engine.Buffer]int64{}}
}

// NewBuffer allocates through the wrapped backend and counts the bytes.
func (t *Tracker) NewBuffer(nbytes int) (engine.Buffer, error) {
	buf, err := t.Backend.NewBuffer(nbytes)
	if err != nil {
		return nil, err
	}
	t.live[buf] = int64(nbytes)
	t.inUse += int64(nbytes)
	t.peak = max(t.peak, t.inUse)
	return buf, nil
}

// FreeBuffer frees through the wrapped backend. A buffer the wrapped
// backend made for itself inside an op (a ParamTable's cache, which its
// owner frees through the backend it holds: this tracker) was never counted
// and is freed without changing the counts.
func (t *Tracker) FreeBuffer(buf engine.Buffer) {
	if n, ok := t.live[buf]; ok {
		delete(t.live, buf)
		t.inUse -= n
	}
	t.Backend.FreeBuffer(buf)
}

// InUse returns the bytes allocated and not yet freed.
func (t *Tracker) InUse() int64 { return t.inUse }

// Peak returns the most bytes in use at once since the last ResetPeak.
func (t *Tracker) Peak() int64 { return t.peak }

// ResetPeak starts a new high-water mark at the bytes in use now.
func (t *Tracker) ResetPeak() { t.peak = t.inUse }

// FreeAll frees every buffer still allocated through t.
func (t *Tracker) FreeAll() {
	for buf := range t.live {
		t.FreeBuffer(buf)
	}
}

// Record records through the wrapped backend (engine.Record), so that a
// model on the tracker can replay recorded steps where the backend can.
func (t *Tracker) Record(fn func()) (engine.Recording, error) { return engine.Record(t.Backend, fn) }

// Launches returns the wrapped backend's launch counts (engine.Launches),
// zeros where it does not count.
func (t *Tracker) Launches() (ops, calls int64) {
	ops, calls, _ = engine.Launches(t.Backend)
	return ops, calls
}

// StartOpProfile starts the wrapped backend's op profile (engine.OpProfiler),
// or returns engine.ErrNoOpProfiler where it cannot time its ops.
func (t *Tracker) StartOpProfile() error {
	p, ok := t.Backend.(engine.OpProfiler)
	if !ok {
		return engine.ErrNoOpProfiler
	}
	return p.StartOpProfile()
}

// StopOpProfile stops the wrapped backend's op profile.
func (t *Tracker) StopOpProfile() ([]engine.OpTime, error) {
	p, ok := t.Backend.(engine.OpProfiler)
	if !ok {
		return nil, engine.ErrNoOpProfiler
	}
	return p.StopOpProfile()
}
