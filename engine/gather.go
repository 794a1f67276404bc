package engine

import (
	"encoding/binary"
	"fmt"
)

// GatherBytes gathers every rank's mine, of any length, on every rank of c,
// in rank order, through buffers of backend b (the backend c runs on). It
// is two collectives: an AllGather of the lengths, then one of the bytes,
// each rank's padded to the longest.
func GatherBytes(c Communicator, b Backend, mine []byte) ([][]byte, error) {
	w := c.Size()
	// Each rank's length as [lo, hi] i32 words, gathered into [W·2].
	lens, err := gatherWords(c, b, binary.LittleEndian.AppendUint64(nil, uint64(len(mine))))
	if err != nil {
		return nil, fmt.Errorf("gathering the ranks' lengths: %w", err)
	}
	longest := 0
	n := make([]int, w)
	for r := range w {
		n[r] = int(binary.LittleEndian.Uint64(lens[8*r:]))
		longest = max(longest, n[r])
	}
	if longest == 0 {
		return make([][]byte, w), nil
	}
	padded := make([]byte, (longest+3)/4*4)
	copy(padded, mine)
	all, err := gatherWords(c, b, padded)
	if err != nil {
		return nil, fmt.Errorf("gathering the ranks' bytes: %w", err)
	}
	out := make([][]byte, w)
	for r := range w {
		out[r] = all[r*len(padded) : r*len(padded)+n[r]]
	}
	return out, nil
}

// gatherWords all-gathers mine (a multiple of 4 bytes, the same length on
// every rank) as i32 words and returns the ranks' bytes concatenated in
// rank order.
func gatherWords(c Communicator, b Backend, mine []byte) ([]byte, error) {
	if len(mine)%4 != 0 {
		panic(fmt.Sprintf("engine: gathering %d bytes, not a multiple of 4", len(mine)))
	}
	in, err := Alloc(b, I32, len(mine)/4) // [n] i32
	if err != nil {
		return nil, err
	}
	defer b.FreeBuffer(in.Buffer())
	all, err := Alloc(b, I32, len(mine)/4*c.Size()) // [W·n] i32
	if err != nil {
		return nil, err
	}
	defer b.FreeBuffer(all.Buffer())
	b.Upload(in, mine)
	if err := c.AllGather(all, in); err != nil {
		return nil, err
	}
	got := make([]byte, all.Bytes())
	b.Download(got, all)
	return got, nil
}
