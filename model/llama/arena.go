package llama

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// arena is the scratch memory of one pass — a training forward, its
// backward, or a generation step: buffers taken from the model's pool as
// the pass needs them and given back together by release. A failed
// allocation panics with outOfMemory, which catchOOM, deferred by the
// pass's entry point, turns into its error; the layer code between can
// then take buffers without checking each one.
type arena struct {
	pool *engine.Pool
	held []*engine.Tensor
}

// outOfMemory carries an allocation failure out of a pass's layers to
// catchOOM.
type outOfMemory struct{ err error }

// take returns a buffer of dtype dt and the given shape from the pool, held
// until release; its contents are undefined.
func (a *arena) take(dt engine.DType, shape ...int) *engine.Tensor {
	t, err := a.pool.Get(dt, shape...)
	if err != nil {
		panic(outOfMemory{err})
	}
	a.held = append(a.held, t)
	return t
}

// release gives every buffer back to the pool.
func (a *arena) release() {
	for _, t := range a.held {
		a.pool.Put(t)
	}
	a.held = nil
}

// bytes returns the bytes of the buffers held.
func (a *arena) bytes() int {
	n := 0
	for _, t := range a.held {
		n += t.Bytes()
	}
	return n
}

// catchOOM, deferred by a pass's entry point, turns an allocation failure
// raised by take into *err, "what: the failure"; any other panic goes on.
func catchOOM(err *error, what string) {
	if r := recover(); r != nil {
		oom, ok := r.(outOfMemory)
		if !ok {
			panic(r)
		}
		*err = fmt.Errorf("%s: %w", what, oom.err)
	}
}
