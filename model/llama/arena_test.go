package llama

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// capped is an allocator that refuses buffers once limit bytes are out.
type capped struct {
	engine.Backend
	limit, out int
}

var errCapped = errors.New("over the test's cap")

func (c *capped) NewBuffer(n int) (engine.Buffer, error) {
	if c.out+n > c.limit {
		return nil, errCapped
	}
	c.out += n
	return c.Backend.NewBuffer(n)
}

// TestArena checks that an arena gives back everything it took, and that a
// failed allocation becomes the error of the pass that deferred catchOOM,
// naming the pass and wrapping the allocator's error.
func TestArena(t *testing.T) {
	alloc := &capped{Backend: cpu.New(cpu.Options{Threads: 1}), limit: 8 << 10}
	pool := engine.NewPool(alloc)
	pass := func(sizes ...int) (held int, err error) {
		a := arena{pool: pool}
		defer a.release()
		defer catchOOM(&err, "test pass")
		for _, n := range sizes {
			a.take(engine.F32, n)
		}
		return a.bytes(), nil
	}
	held, err := pass(256, 512)
	if err != nil {
		t.Fatal(err)
	}
	if held != (256+512)*4 {
		t.Errorf("the arena held %d bytes, want %d", held, (256+512)*4)
	}
	if got := pool.Stats().BytesInUse; got != 0 {
		t.Errorf("%d bytes still in use after release", got)
	}
	_, err = pass(256, 4096)
	if !errors.Is(err, errCapped) || !strings.HasPrefix(err.Error(), "test pass: ") {
		t.Errorf("an allocation over the cap gave %v, want an error naming the pass and wrapping the allocator's", err)
	}
	if got := pool.Stats().BytesInUse; got != 0 {
		t.Errorf("%d bytes still in use after a failed pass", got)
	}
	defer func() {
		if r := recover(); r != "not an allocation" {
			t.Errorf("catchOOM swallowed or changed another panic: %v", r)
		}
	}()
	func() {
		var err error
		defer catchOOM(&err, "test pass")
		panic("not an allocation")
	}()
}

func TestBatchAppend(t *testing.T) {
	cases := []struct {
		name      string
		seqs      [][]int32
		predicted []func(int) bool
		want      Batch
	}{
		{"every token", [][]int32{{5, 6, 7}}, []func(int) bool{func(int) bool { return true }},
			Batch{IDs: []int32{5, 6, 7}, Targets: []int32{6, 7, -1}, Lens: []int{3}}},
		{"masked", [][]int32{{5, 6, 7, 8}}, []func(int) bool{func(i int) bool { return i == 2 }},
			Batch{IDs: []int32{5, 6, 7, 8}, Targets: []int32{-1, 7, -1, -1}, Lens: []int{4}}},
		{"two sequences never predict across", [][]int32{{1, 2}, {3, 4, 9}},
			[]func(int) bool{func(int) bool { return true }, func(i int) bool { return i > 0 }},
			Batch{IDs: []int32{1, 2, 3, 4, 9}, Targets: []int32{2, -1, 4, 9, -1}, Lens: []int{2, 3}}},
	}
	for _, c := range cases {
		var b Batch
		for k, s := range c.seqs {
			b.Append(s, c.predicted[k])
		}
		if !equalBatch(b, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, b, c.want)
		}
	}
}

func equalBatch(a, b Batch) bool {
	return slices.Equal(a.IDs, b.IDs) && slices.Equal(a.Targets, b.Targets) && slices.Equal(a.Lens, b.Lens)
}
