package engine

import (
	"fmt"
	"strings"
	"testing"
)

// testBuffer is a Buffer of a given size, holding nothing: NewParamTable
// only looks at the tensors' dtypes, shapes and offsets.
type testBuffer int

func (testBuffer) Device() Device { return CPU }
func (b testBuffer) Size() int    { return int(b) }

// TestNewParamTableAlignment: a parameter whose byte offset is not a
// multiple of its element size (a view NewTensor refuses, made here
// directly) makes NewParamTable panic, naming the span, offset, dtype and
// shape; offsets that are multiples of the size, 16-byte aligned or not,
// are accepted.
func TestNewParamTableAlignment(t *testing.T) {
	cases := []struct {
		dt    DType
		off   int
		shape Shape
		bad   bool
	}{
		{F32, 0, Shape{3}, false},
		{F32, 4, Shape{3}, false},
		{F32, 2, Shape{3}, true},
		{F32, 1, Shape{2, 2}, true},
		{F32, 7, Shape{1}, true},
		{BF16, 2, Shape{5}, false},
		{BF16, 1, Shape{5}, true},
		{F16, 10, Shape{1, 4}, false},
		{F16, 3, Shape{1, 4}, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_%v_at_%d", c.dt, c.shape, c.off), func(t *testing.T) {
			ok := &Tensor{buf: testBuffer(64), off: 0, shape: Shape{2}, dtype: F32}
			w := &Tensor{buf: testBuffer(64), off: c.off, shape: c.shape, dtype: c.dt}
			spans := []AdamWSpan{{W: ok, Off: 0, MasterOff: -1}, {W: w, Off: 4, MasterOff: -1}}
			if c.dt != F32 {
				spans[1].MasterOff = 0
			}
			defer func() {
				r := recover()
				if !c.bad {
					if r != nil {
						t.Errorf("panicked: %v", r)
					}
					return
				}
				msg, _ := r.(string)
				if msg == "" {
					t.Fatalf("no panic (recovered %v)", r)
				}
				for _, want := range []string{"span 1", fmt.Sprintf("offset %d", c.off), c.dt.String(), c.shape.String()} {
					if !strings.Contains(msg, want) {
						t.Errorf("panic %q does not name %q", msg, want)
					}
				}
			}()
			NewParamTable(spans)
		})
	}
}
