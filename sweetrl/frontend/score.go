package frontend

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"

	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/sweetrl"
)

// Embedder maps images to embedding vectors, such as CLIP's image tower.
type Embedder interface {
	// Embed returns one vector per image, all of one length.
	Embed(images []image.Image) ([][]float32, error)
}

// NoAnswerSize is the side of the black square that stands for the answer
// of a trajectory whose agent never wrote a page, as in the reference.
const NoAnswerSize = 224

// Reward maps a cosine to a trajectory reward, which must lie in [0, 1]:
// a negative cosine counts as 0.
func Reward(cosine float64) float64 { return min(max(cosine, 0), 1) }

// DefaultBatch is the number of answers a Scorer renders and embeds at a
// time unless told otherwise.
const DefaultBatch = 64

// Scorer scores frontend answers: it renders the answer and the target
// page, embeds both screenshots and returns the cosine of the embeddings.
// It implements sweetrl.Scorer.
type Scorer struct {
	// Renderer renders pages to PNG screenshots.
	Renderer Renderer
	// Embedder embeds the screenshots.
	Embedder Embedder
	// Batch is the number of answers rendered and embedded at a time
	// (0: DefaultBatch); their screenshots are held in memory together.
	Batch int
}

var _ sweetrl.Scorer = Scorer{}

// Score implements sweetrl.Scorer: answers[i] is scored against the
// ground truth page of tasks[i], and each Score's Reward is the cosine
// clipped to [0, 1] (see Reward). Passed and Total are 0, as frontend
// tasks have no tests.
func (s Scorer) Score(ctx context.Context, tasks []sweetrl.Task, answers []string) ([]sweetrl.Score, error) {
	if len(tasks) != len(answers) {
		return nil, fmt.Errorf("frontend: %d answers for %d tasks", len(answers), len(tasks))
	}
	targets := make([]string, len(tasks))
	for i, t := range tasks {
		targets[i] = t.GroundTruth
	}
	cos, err := s.Cosines(ctx, answers, targets)
	if err != nil {
		return nil, err
	}
	scores := make([]sweetrl.Score, len(cos))
	for i, c := range cos {
		scores[i] = sweetrl.Score{Reward: Reward(c)}
	}
	return scores, nil
}

// Cosines returns the cosine similarity of each answer page with the
// target page of the same index (answers[i] against targets[i]). An empty
// answer (no page written) is a black NoAnswerSize square. Screenshots that
// are not PNG images are errors naming the index.
func (s Scorer) Cosines(ctx context.Context, answers, targets []string) ([]float64, error) {
	if len(answers) != len(targets) {
		return nil, fmt.Errorf("frontend: %d answers for %d targets", len(answers), len(targets))
	}
	batch := s.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	cos := make([]float64, 0, len(answers))
	for lo := 0; lo < len(answers); lo += batch {
		hi := min(lo+batch, len(answers))
		c, err := s.cosines(ctx, answers[lo:hi], targets[lo:hi], lo)
		if err != nil {
			return nil, err
		}
		cos = append(cos, c...)
	}
	return cos, nil
}

// cosines scores one batch; first is the index of its first answer.
func (s Scorer) cosines(ctx context.Context, answers, targets []string, first int) ([]float64, error) {
	n := len(answers)
	imgs := make([]image.Image, 2*n) // answers, then targets
	for i := range answers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if answers[i] == "" {
			imgs[i] = blackSquare(NoAnswerSize)
		} else if imgs[i], err = s.render(ctx, answers[i]); err != nil {
			return nil, fmt.Errorf("frontend: answer %d: %w", first+i, err)
		}
		if imgs[n+i], err = s.render(ctx, targets[i]); err != nil {
			return nil, fmt.Errorf("frontend: target %d: %w", first+i, err)
		}
	}
	embs, err := s.Embedder.Embed(imgs)
	if err != nil {
		return nil, fmt.Errorf("frontend: embedding: %w", err)
	}
	if len(embs) != len(imgs) {
		return nil, fmt.Errorf("frontend: the embedder returned %d vectors for %d images", len(embs), len(imgs))
	}
	cos := make([]float64, n)
	for i := range cos {
		a, t := embs[i], embs[n+i]
		if len(a) != len(t) {
			return nil, fmt.Errorf("frontend: embeddings of lengths %d and %d for answer %d", len(a), len(t), first+i)
		}
		cos[i] = clip.Cosine(a, t)
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
