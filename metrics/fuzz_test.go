package metrics

import (
	"bytes"
	"errors"
	"testing"

	"github.com/turnwise/turnwise/internal/jsonl"
)

// FuzzReadFrom feeds a metrics file's bytes to ReadFrom and what it reads
// to the plots: records or a *jsonl.LineError naming the file, never a
// panic; the plots take whatever records were read.
func FuzzReadFrom(f *testing.F) {
	for _, s := range []string{
		"{\"step\": 1, \"loss\": 2.5, \"lr\": 0.001}\n{\"step\": 2, \"loss\": 2.1, \"lr\": 0.001}\n",
		"{\"step\": 1, \"loss\": NaN}\n", "{\"loss\": 1}\n", "\n\n{\"step\": 3}\n", "[1]\n", "{\"step\": 1e400}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		recs, err := ReadFrom(bytes.NewReader(raw), "m.jsonl")
		if err != nil {
			var le *jsonl.LineError
			if !errors.As(err, &le) || le.Name != "m.jsonl" {
				t.Fatalf("error %v (%T) does not name the file and line", err, err)
			}
		}
		if len(recs) == 0 {
			return
		}
		PlotSVG(recs, "fuzz")
		PlotMetricsSVG(recs, "fuzz", PlotOptions{})
	})
}
