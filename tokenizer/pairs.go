package tokenizer

import "math/bits"

// pairTable maps a pair of adjacent token ids to its merge: an open
// addressing hash table with linear probing, flat in memory so that a lookup
// usually touches one cache line. Merge lookups dominate encoding time.
type pairTable struct {
	// slots holds key+1 (0 marks an empty slot) and value, interleaved.
	slots []uint64
	mask  uint64
	shift uint
	n     int
}

// newPairTable returns a table sized for n entries, at most 3/4 full.
func newPairTable(n int) *pairTable {
	size := uint64(16)
	for 3*size < uint64(4*n) {
		size <<= 1
	}
	return &pairTable{
		slots: make([]uint64, 2*size),
		mask:  size - 1,
		shift: uint(64 - bits.TrailingZeros64(size)),
	}
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (p *pairTable) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> p.shift }

// get returns the value stored for key.
func (p *pairTable) get(key uint64) (uint64, bool) {
	k := key + 1
	for i := p.slot(k); ; i = (i + 1) & p.mask {
		switch p.slots[2*i] {
		case k:
			return p.slots[2*i+1], true
		case 0:
			return 0, false
		}
	}
}

// put stores value for key unless key is present, and reports whether it
// stored it; the old value is returned when it did not.
func (p *pairTable) put(key, value uint64) (old uint64, stored bool) {
	if 4*(p.n+1) > 3*len(p.slots)/2 {
		panic("tokenizer: pairTable is full; newPairTable was given too small a size")
	}
	k := key + 1
	for i := p.slot(k); ; i = (i + 1) & p.mask {
		switch p.slots[2*i] {
		case k:
			return p.slots[2*i+1], false
		case 0:
			p.slots[2*i], p.slots[2*i+1] = k, value
			p.n++
			return 0, true
		}
	}
}

// len returns the number of entries.
func (p *pairTable) len() int { return p.n }

// each calls fn with every entry's key and value, in no particular order.
func (p *pairTable) each(fn func(key, value uint64)) {
	for i := 0; i < len(p.slots); i += 2 {
		if k := p.slots[i]; k != 0 {
			fn(k-1, p.slots[i+1])
		}
	}
}
