package frontend

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
)

// Embedder maps images to embedding vectors, such as CLIP's image tower.
type Embedder interface {
	// Embed returns one vector per image, all of one length.
	Embed(images []image.Image) ([][]float32, error)
}

// NoAnswerSize is the side of the black square that stands for the answer
// of a trajectory whose agent never wrote a page, as in the reference.
const NoAnswerSize = 224

// Cosine returns the cosine similarity of a and b, computed in float64; 0
// when either is all zeros. It panics if their lengths differ.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("frontend: cosine of vectors of lengths %d and %d", len(a), len(b)))
	}
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / (math.Sqrt(aa) * math.Sqrt(bb))
}

// Reward maps a cosine to a trajectory reward, which must lie in [0, 1]:
// a negative cosine counts as 0.
func Reward(cosine float64) float64 { return min(max(cosine, 0), 1) }

// Scorer scores frontend answers: it renders the answer and the target
// page, embeds both screenshots and returns the cosine of the embeddings.
type Scorer struct {
	Renderer Renderer
	Embedder Embedder
}

// Score returns the cosine similarity of each answer page with the target
// page of the same index (answers[i] against targets[i]). An empty answer
// (no page written) is a black NoAnswerSize square. Screenshots that are
// not PNG images are errors naming the index.
func (s Scorer) Score(ctx context.Context, answers, targets []string) ([]float64, error) {
	if len(answers) != len(targets) {
		return nil, fmt.Errorf("frontend: %d answers for %d targets", len(answers), len(targets))
	}
	imgs := make([]image.Image, 2*len(answers)) // answers, then targets
	for i := range answers {
		var err error
		if answers[i] == "" {
			imgs[i] = blackSquare(NoAnswerSize)
		} else if imgs[i], err = s.render(ctx, answers[i]); err != nil {
			return nil, fmt.Errorf("frontend: answer %d: %w", i, err)
		}
		if imgs[len(answers)+i], err = s.render(ctx, targets[i]); err != nil {
			return nil, fmt.Errorf("frontend: target %d: %w", i, err)
		}
	}
	if len(imgs) == 0 {
		return nil, nil
	}
	embs, err := s.Embedder.Embed(imgs)
	if err != nil {
		return nil, fmt.Errorf("frontend: embedding: %w", err)
	}
	if len(embs) != len(imgs) {
		return nil, fmt.Errorf("frontend: the embedder returned %d vectors for %d images", len(embs), len(imgs))
	}
	cos := make([]float64, len(answers))
	for i := range cos {
		a, t := embs[i], embs[len(answers)+i]
		if len(a) != len(t) {
			return nil, fmt.Errorf("frontend: embeddings of lengths %d and %d for answer %d", len(a), len(t), i)
		}
		cos[i] = Cosine(a, t)
	}
	return cos, nil
}

// render renders page and decodes its screenshot.
func (s Scorer) render(ctx context.Context, page string) (image.Image, error) {
	shot, err := s.Renderer.Render(ctx, page)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return img, nil
}

// blackSquare returns a black n×n RGBA image.
func blackSquare(n int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.Black), image.Point{}, draw.Src)
	return img
}
