package frontend_test

import (
	"context"
	"math"
	"os/exec"
	"testing"

	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/frontend/render"
)

// TestGroundTruthScoresOne scores ColBench ground truths against
// themselves through the real pieces — the offline chromium renderer and a
// random-weight CLIP tower of ViT-B/32's architecture, smaller — and checks
// that each scores 1 against itself and less than 1 against another task's.
func TestGroundTruthScoresOne(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("chromium not installed (scripts/setup.sh installs it)")
	}
	if _, err := render.FindTailwindCLI(); err != nil {
		t.Skipf("no Tailwind CLI: %v", err)
	}
	tasks, err := frontend.LoadTasks(testdata.Path(t, "colbench", "frontend_test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := render.New(render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg := clip.Config{Hidden: 64, FFN: 256, Layers: 2, Heads: 4, Patch: 32, ImageSize: 224, Projection: 32, NormEps: 1e-5}
	m, err := clip.NewRandom(cpu.New(cpu.Options{Threads: 2}), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := frontend.Scorer{Renderer: r, Embedder: m}
	var pages []string
	for _, task := range tasks[:3] {
		pages = append(pages, task.GroundTruth)
	}
	self, err := s.Cosines(context.Background(), pages, pages)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range self {
		if math.Abs(c-1) > 1e-6 {
			t.Errorf("ground truth %d against itself: cosine %v, want 1", i, c)
		}
	}
	other, err := s.Cosines(context.Background(), pages, []string{pages[1], pages[2], pages[0]})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range other {
		if c >= 1-1e-6 {
			t.Errorf("ground truth %d against another task's: cosine %v, want below 1", i, c)
		}
	}
}
