package kernelbench

import "testing"

func TestCopies(t *testing.T) {
	const l2 = 50 << 20
	for _, c := range []struct {
		bytes, cache int64
		want         int
	}{
		{1 << 30, l2, 1},   // one set is already 20× the cache
		{60 << 20, l2, 2},  // 120 MiB ≥ 100 MiB
		{10 << 20, l2, 10}, // 100 MiB
		{1 << 10, l2, maxCopies},
		{1 << 20, 0, 1}, // no cache to defeat
	} {
		if got := Copies(c.bytes, c.cache); got != c.want {
			t.Errorf("Copies(%d, %d) = %d, want %d", c.bytes, c.cache, got, c.want)
		}
	}
}
