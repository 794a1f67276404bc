package engine

import "fmt"

// AdamWSpan places one parameter of a multi-tensor AdamW (Backend.AdamWMulti)
// in an optimizer's flat buffers. The parameter W stays where its owner
// allocated it; its gradient and moments are elements [Off, Off+W.Numel()) of
// the flat gradient and moment buffers, and its f32 master copy, when it has
// one, elements [MasterOff, MasterOff+W.Numel()) of the flat master buffer.
type AdamWSpan struct {
	W         *Tensor // the parameter, float
	Off       int     // its first element in the flat gradient and moments
	MasterOff int     // its first element in the flat master buffer; < 0: no master (W must be f32)
}

// ParamTable is the fixed list of parameters Backend.AdamWMulti updates in one
// call. Its spans are checked once, when it is made, and never change, so a
// backend may derive its own form of the table (on a GPU, the spans' device
// addresses in device memory) on first use and keep it in the table's cache
// for every later call. Free releases that cache.
type ParamTable struct {
	spans     []AdamWSpan
	end       int    // one past the last flat element of any span
	masterEnd int    // one past the last master element of any span (0: no masters)
	cache     Buffer // a backend's form of the table, or nil
}

// NewParamTable returns the table of spans, which must lie in increasing
// order of Off without overlapping, as must the master ranges of those that
// have one; a non-f32 parameter must have a master; every parameter must
// start at a byte offset that is a multiple of its element size (a kernel
// reads it element by element, which a GPU refuses at a misaligned address).
// It panics, naming the span, otherwise: the layout is the optimizer's, not
// a user's.
func NewParamTable(spans []AdamWSpan) *ParamTable {
	t := &ParamTable{spans: append([]AdamWSpan(nil), spans...)}
	for i, s := range t.spans {
		MustDType("ParamTable", "parameter", s.W, F32, BF16, F16)
		if !aligned(s.W.Offset(), s.W.DType()) {
			panic(fmt.Sprintf("engine: ParamTable: span %d: %v %v at byte offset %d: the offset is not a multiple of the %d-byte %v element",
				i, s.W.DType(), s.W.Shape(), s.W.Offset(), s.W.DType().Size(), s.W.DType()))
		}
		n := s.W.Numel()
		if s.Off < t.end {
			panic(fmt.Sprintf("engine: ParamTable: span %d (%v) at offset %d overlaps or precedes the previous one (ends at %d)", i, s.W, s.Off, t.end))
		}
		t.end = s.Off + n
		switch {
		case s.MasterOff >= 0:
			if s.MasterOff < t.masterEnd {
				panic(fmt.Sprintf("engine: ParamTable: span %d (%v): master at %d overlaps or precedes the previous one (ends at %d)", i, s.W, s.MasterOff, t.masterEnd))
			}
			t.masterEnd = s.MasterOff + n
		case s.W.DType() != F32:
			panic(fmt.Sprintf("engine: ParamTable: span %d: %v parameter needs an f32 master copy", i, s.W))
		}
	}
	return t
}

// Spans returns the table's spans. The caller must not modify them.
func (t *ParamTable) Spans() []AdamWSpan { return t.spans }

// End returns one past the last flat element any span uses: the least
// length of the flat gradient and moment buffers.
func (t *ParamTable) End() int { return t.end }

// MasterEnd returns one past the last master element any span uses (0 when
// no span has a master): the least length of the flat master buffer.
func (t *ParamTable) MasterEnd() int { return t.masterEnd }

// Cache returns the buffer a backend stored with SetCache, or nil.
func (t *ParamTable) Cache() Buffer { return t.cache }

// SetCache keeps a backend's form of the table with it, for later calls.
func (t *ParamTable) SetCache(buf Buffer) { t.cache = buf }

// Free releases the cache, if a backend made one, through b (the backend that
// made it). The table itself stays usable: a later call makes a new cache.
func (t *ParamTable) Free(b Backend) {
	if t.cache != nil {
		b.FreeBuffer(t.cache)
		t.cache = nil
	}
}

// AdamWMultiShape checks the arguments of AdamWMulti against t.
func AdamWMultiShape(t *ParamTable, grad, m, v, master *Tensor, p AdamWParams) {
	MustDType("AdamWMulti", "grad", grad, F32, BF16, F16)
	MustDType("AdamWMulti", "m", m, F32)
	MustDType("AdamWMulti", "v", v, F32)
	n := grad.Numel()
	if m.Numel() != n || v.Numel() != n || n < t.end {
		panic(fmt.Sprintf("engine: AdamWMulti: grad %v, m %v, v %v: want one element count ≥ %d", grad, m, v, t.end))
	}
	if p.Step < 1 {
		panic(fmt.Sprintf("engine: AdamWMulti: step %d, want ≥ 1", p.Step))
	}
	if t.masterEnd > 0 {
		if master == nil {
			panic(fmt.Sprintf("engine: AdamWMulti: the table's masters need %d f32 elements; master is nil", t.masterEnd))
		}
		MustDType("AdamWMulti", "master", master, F32)
		if master.Numel() < t.masterEnd {
			panic(fmt.Sprintf("engine: AdamWMulti: master %v, want ≥ %d elements", master, t.masterEnd))
		}
	}
}
