package frontend

import (
	"context"
	"image"
	"image/color"
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/sweetrl"
)

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"parallel", []float32{1, 2, 2}, []float32{2, 4, 4}, 1},
		{"orthogonal", []float32{1, 0}, []float32{0, 3}, 0},
		{"opposite", []float32{1, -1}, []float32{-2, 2}, -1},
		{"45 degrees", []float32{1, 0}, []float32{1, 1}, 1 / math.Sqrt2},
		{"zero vector", []float32{0, 0}, []float32{1, 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clip.Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Cosine = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReward(t *testing.T) {
	for in, want := range map[float64]float64{-0.3: 0, 0: 0, 0.77: 0.77, 1: 1, 1 + 1e-7: 1} {
		if got := Reward(in); got != want {
			t.Errorf("Reward(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestScorer scores with the fake embedder (mean red, green, blue, 1):
// red (1,0,0,1) against itself is 1; blue (0,0,1,1) against red is
// 1/(√2·√2) = ½; no page, a black square (0,0,0,1), against red is 1/√2;
// a page that times out renders black too.
func TestScorer(t *testing.T) {
	r := &fakeRenderer{colours: map[string]color.RGBA{
		"red":  {255, 0, 0, 255},
		"blue": {0, 0, 255, 255},
	}}
	// Batches of 3 answers: the fourth is scored in a second batch.
	s := Scorer{Renderer: r, Embedder: fakeEmbedder{}, Batch: 3}
	got, err := s.Cosines(context.Background(),
		[]string{"red", "blue", "", "<html>hang</html>"},
		[]string{"red", "red", "red", "red"})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0.5, 1 / math.Sqrt2, 1 / math.Sqrt2}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Errorf("score %d = %v, want %v", i, got[i], want[i])
		}
	}
	for _, p := range r.pages {
		if p == "" {
			t.Error("the empty answer was rendered; it should be the black square")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d scores for %d answers", len(got), len(want))
	}
	if _, err := s.Cosines(context.Background(), []string{"red"}, nil); err == nil {
		t.Error("answers without targets gave no error")
	}

	// As a sweetrl.Scorer: rewards are the cosines, clipped to [0, 1].
	tasks := []sweetrl.Task{{GroundTruth: "red"}, {GroundTruth: "red"}}
	scores, err := s.Score(context.Background(), tasks, []string{"red", "blue"})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(scores[0].Reward-1) > 1e-6 || math.Abs(scores[1].Reward-0.5) > 1e-6 || scores[0].Total != 0 {
		t.Errorf("Score = %+v, want rewards 1 and ½ and no tests", scores)
	}

	r.fail = "blue"
	_, err = s.Cosines(context.Background(), []string{"red", "red", "red", "blue"}, []string{"red", "red", "red", "red"})
	if err == nil || !strings.Contains(err.Error(), "answer 3") {
		t.Errorf("error %v, want the failed render of answer 3", err)
	}
}

// shiftingEmbedder is fakeEmbedder with each vector's first component
// moved by its position in the batch, as a real model's embeddings of one
// image at two places in a batch can differ in their last bits; it records
// how many images each call embeds.
type shiftingEmbedder struct{ calls []int }

func (e *shiftingEmbedder) Embed(imgs []image.Image) ([][]float32, error) {
	e.calls = append(e.calls, len(imgs))
	out, err := fakeEmbedder{}.Embed(imgs)
	for i := range out {
		out[i][0] += float32(i) * 1e-6
	}
	return out, err
}

// TestScorerEmbedsEachImageOnce: a page scored against itself is exactly 1
// (a reward of 1 is a success) even when an image's embedding depends on its
// place in the batch, because each distinct page is rendered once and each
// distinct screenshot embedded once: pages with the same screenshot (blue
// and its copy under another name) share an embedding, as do answers with
// no page.
func TestScorerEmbedsEachImageOnce(t *testing.T) {
	r := &fakeRenderer{colours: map[string]color.RGBA{
		"red": {255, 0, 0, 255}, "blue": {0, 0, 255, 255}, "blue too": {0, 0, 255, 255},
	}}
	e := &shiftingEmbedder{}
	s := Scorer{Renderer: r, Embedder: e}
	got, err := s.Cosines(context.Background(),
		[]string{"blue", "red", "", "blue too", ""},
		[]string{"red", "red", "red", "blue", "blue"})
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != 1 || got[3] != 1 {
		t.Errorf("a page against itself scores %v, and against a page with its screenshot %v; want exactly 1", got[1], got[3])
	}
	if len(e.calls) != 1 || e.calls[0] != 3 {
		t.Errorf("embedded batches of %v images, want one of 3 (red, blue, the black square)", e.calls)
	}
	if len(r.pages) != 3 {
		t.Errorf("rendered %q, want each of the 3 distinct pages once", r.pages)
	}
}
