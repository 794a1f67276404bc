//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// Embedding implements engine.Backend.Embedding.
func (b *Backend) Embedding(out, table, ids *engine.Tensor) {
	n, _, d := engine.EmbeddingShape("Embedding", out, table, ids)
	b.launch("Embedding", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_embedding(ptr(out), dt(out), ptr(table), dt(table), iptr(ids), i64(n), i64(d), str)
	})
}

// EmbeddingBackward implements engine.Backend.EmbeddingBackward.
func (b *Backend) EmbeddingBackward(dTable, dOut, ids *engine.Tensor) {
	n, v, d := engine.EmbeddingShape("EmbeddingBackward", dOut, dTable, ids)
	b.launch("EmbeddingBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_embedding_backward_workspace(i64(n))))
		return C.tw_embedding_backward(ptr(dTable), dt(dTable), ptr(dOut), dt(dOut), iptr(ids),
			i64(n), i64(v), i64(d), devPtr(ws), str)
	})
}
