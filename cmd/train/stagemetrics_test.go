package main

import (
	"path/filepath"
	"testing"

	"github.com/turnwise/turnwise/metrics"
)

// checkStageMetrics checks that an RL stage's output directory holds a
// metrics.jsonl whose records all carry keys.
func checkStageMetrics(t *testing.T, dir string, keys ...string) {
	t.Helper()
	recs, err := metrics.Read(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s: metrics.jsonl is empty", dir)
	}
	for _, r := range recs {
		for _, k := range append(keys, metrics.Loss, metrics.LR, metrics.TokensPerS, metrics.WallS, metrics.PoolPeakBytes, metrics.GoHeapBytes) {
			if _, ok := r.Get(k); !ok {
				t.Errorf("%s: step %d has no %q", dir, r.Step, k)
			}
		}
	}
}
