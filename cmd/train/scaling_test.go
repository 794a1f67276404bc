package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/turnwise/turnwise/metrics"
)

// BenchmarkLaunchSFTScaling measures the step time of data-parallel SFT on
// CPU ranks: the 24.4 M-parameter ref24M model from scratch on the
// built-in corpus, a fixed global batch of 2 × 512 tokens a step, as one
// process accumulating two micro-batches (on one thread, and on two) and as
// two processes of one thread each (train launch --nproc-per-node 2, Gloo),
// which take one micro-batch each and all-reduce the 97.6 MB f32 gradient
// after the backward, or with --overlap-reduce layer by layer during it.
// It reports the median seconds a step takes after the first (s/step, from
// metrics.jsonl's wall_s) and the tokens a second it gives; ns/op is a whole
// run's, start-up included. Run it alone, with -benchtime 1x:
//
//	go test -run '^$' -bench LaunchSFTScaling -benchtime 1x ./cmd/train/
func BenchmarkLaunchSFTScaling(b *testing.B) {
	const steps, tokens = 6, 512 // tokens per micro-batch; two micro-batches a step
	for _, c := range []struct {
		procs, threads int
		overlap        bool
	}{{1, 1, false}, {1, 2, false}, {2, 1, false}, {2, 1, true}} {
		name := fmt.Sprintf("procs=%d/threads=%d", c.procs, c.threads)
		if c.overlap {
			name += "/overlap"
		}
		b.Run(name, func(b *testing.B) {
			var secs []float64 // every run's step times after its first
			for range b.N {
				dir := b.TempDir()
				args := []string{"sft", "--preset", "ref24M", "--threads", strconv.Itoa(c.threads), "--steps", strconv.Itoa(steps),
					"--batch-tokens", strconv.Itoa(tokens), "--micro-batches", strconv.Itoa(2 / c.procs), "--eval-every", "0",
					"--prompt", "", "--checkpoint-every", "1000", "--run-dir", dir, "--overlap-reduce=" + strconv.FormatBool(c.overlap)}
				launch := append([]string{"--nproc-per-node", strconv.Itoa(c.procs), "--master-port", freePort(b), "--"}, args...)
				if out, errOut, err := launchRun(b, launch...); err != nil {
					b.Fatalf("%v\n%s\n%s", err, out, errOut)
				}
				recs, err := metrics.Read(filepath.Join(dir, "metrics.jsonl"))
				if err != nil {
					b.Fatal(err)
				}
				if len(recs) != steps {
					b.Fatalf("%d steps recorded, want %d", len(recs), steps)
				}
				prev, _ := recs[0].Get(metrics.WallS)
				for _, r := range recs[1:] {
					w, _ := r.Get(metrics.WallS)
					secs = append(secs, w-prev)
					prev = w
				}
			}
			slices.Sort(secs)
			med := secs[len(secs)/2]
			b.ReportMetric(med, "s/step")
			b.ReportMetric(2*tokens/med, "tok/s")
		})
	}
}
