package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// ScatterRows implements engine.Backend.ScatterRows.
func (b *Backend) ScatterRows(dst, src, rows *engine.Tensor) {
	n, w := engine.ScatterRowsShape(dst, src, rows)
	d, s, r := bytesOf(dst), bytesOf(src), i32s(rows)
	for i := range n {
		row := int(r[i])
		if row < 0 || row >= dst.Dim(0) {
			panic(fmt.Sprintf("cpu: ScatterRows: rows[%d] = %d is outside dst %v", i, row, dst))
		}
		copy(d[row*w:(row+1)*w], s[i*w:(i+1)*w])
	}
}
