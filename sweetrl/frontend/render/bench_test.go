package render

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// frontendTestPath is the ColBench frontend test split, relative to the
// package directory (the repository's ../shared/testdata).
var frontendTestPath = filepath.Join("..", "..", "..", "..", "shared", "testdata", "colbench", "frontend_test.jsonl")

// readGroundTruths reads the ground_truth HTML of every row of the ColBench
// frontend test split, skipping the benchmark when it is absent.
func readGroundTruths(b *testing.B) []string {
	b.Helper()
	f, err := os.Open(frontendTestPath)
	if err != nil {
		b.Skipf("ColBench frontend test split not available: %v", err)
	}
	defer f.Close()
	var pages []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var row struct {
			GroundTruth string `json:"ground_truth"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			b.Fatalf("%s:%d: %v", frontendTestPath, line, err)
		}
		pages = append(pages, row.GroundTruth)
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("%s: %v", frontendTestPath, err)
	}
	return pages
}

// BenchmarkGroundTruths renders all ColBench frontend test ground truths
// with 1, 2 and 4 tabs (run it with -benchtime=1x) and reports how many
// rendered, the seconds per page and the pages per second, Tailwind
// compilation (one CLI run for the batch) included.
func BenchmarkGroundTruths(b *testing.B) {
	pages := readGroundTruths(b)
	for _, tabs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("tabs=%d", tabs), func(b *testing.B) {
			if _, err := FindTailwindCLI(); err != nil {
				b.Skipf("no Tailwind CLI (%v)", err)
			}
			r, err := New(Options{Tabs: tabs})
			if err != nil {
				b.Skip(err)
			}
			defer r.Close()
			// Start the browser outside the timing.
			if _, err := r.Render(context.Background(), "<html></html>"); err != nil {
				b.Fatal(err)
			}
			var rendered int
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				out, err := r.RenderAll(context.Background(), pages)
				if err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				rendered = 0
				for i, p := range out {
					if p.Err == nil {
						rendered++
					} else {
						b.Logf("page %d: %v", i, p.Err)
					}
				}
			}
			per := elapsed.Seconds() / float64(b.N*len(pages))
			b.ReportMetric(float64(rendered), "rendered")
			b.ReportMetric(per, "s/page")
			b.ReportMetric(1/per, "pages/s")
		})
	}
}
