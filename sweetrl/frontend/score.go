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

// BatchRenderer is a Renderer that also renders many pages at once (on a
// pool of browser tabs, say); a Scorer whose Renderer is one renders each
// batch of answers and targets with RenderAll.
type BatchRenderer interface {
	Renderer
	// RenderAll returns the screenshots of pages, in order, with Render's
	// rules: a page that does not finish in time is a black image.
	RenderAll(ctx context.Context, pages []string) ([][]byte, error)
}

// cosines scores one batch; first is the index of its first answer. Each
// distinct page is rendered once and each distinct screenshot embedded
// once: a page scored against itself then has cosine exactly 1 (the
// embeddings of one image at two places in a batch can differ in their last
// bits, which made an answer equal to its target score 0.99999999999998,
// not the 1 that counts as a success), and what repeats (an answer equal to
// its target, one target for several answers, answers with no page) costs
// one rendering and one embedding.
func (s Scorer) cosines(ctx context.Context, answers, targets []string, first int) ([]float64, error) {
	n := len(answers)
	page := func(j int) string { // pages 0 … n−1 are the answers, n … 2n−1 the targets
		if j < n {
			return answers[j]
		}
		return targets[j-n]
	}
	// slot[j]: the index in pages of page j, or −1 for no answer (the black
	// square); owner[k]: the first j showing pages[k], which names it in errors.
	slot := make([]int, 2*n)
	var pages []string
	var owner []int
	seen := map[string]int{}
	for j := range slot {
		p := page(j)
		if j < n && p == "" {
			slot[j] = -1
			continue
		}
		k, ok := seen[p]
		if !ok {
			k = len(pages)
			seen[p] = k
			pages, owner = append(pages, p), append(owner, j)
		}
		slot[j] = k
	}
	name := func(k int) string { // names pages[k] in errors
		if j := owner[k]; j >= n {
			return fmt.Sprintf("target %d", first+j-n)
		}
		return fmt.Sprintf("answer %d", first+owner[k])
	}
	shots, err := s.renderAll(ctx, pages, name)
	if err != nil {
		return nil, err
	}
	// The distinct screenshots, and the black square if an answer has no page.
	var imgs []image.Image
	imgOf := make([]int, len(pages)) // pages[k]'s index in imgs
	shotAt := map[string]int{}
	for k, shot := range shots {
		i, ok := shotAt[string(shot)]
		if !ok {
			img, err := decodePNG(shot)
			if err != nil {
				return nil, fmt.Errorf("frontend: %s: %w", name(k), err)
			}
			i = len(imgs)
			shotAt[string(shot)] = i
			imgs = append(imgs, img)
		}
		imgOf[k] = i
	}
	black := -1
	for _, k := range slot {
		if k < 0 {
			black = len(imgs)
			imgs = append(imgs, blackSquare(NoAnswerSize))
			break
		}
	}
	embs, err := s.Embedder.Embed(imgs)
	if err != nil {
		return nil, fmt.Errorf("frontend: embedding: %w", err)
	}
	if len(embs) != len(imgs) {
		return nil, fmt.Errorf("frontend: the embedder returned %d vectors for %d images", len(embs), len(imgs))
	}
	emb := func(j int) []float32 {
		if slot[j] < 0 {
			return embs[black]
		}
		return embs[imgOf[slot[j]]]
	}
	cos := make([]float64, n)
	for i := range cos {
		a, t := emb(i), emb(n+i)
		if len(a) != len(t) {
			return nil, fmt.Errorf("frontend: embeddings of lengths %d and %d for answer %d", len(a), len(t), first+i)
		}
		cos[i] = clip.Cosine(a, t)
	}
	return cos, nil
}

// renderAll renders pages, with RenderAll when the renderer is a
// BatchRenderer and one at a time otherwise; name(k) names pages[k] in
// errors.
func (s Scorer) renderAll(ctx context.Context, pages []string, name func(k int) string) ([][]byte, error) {
	if br, ok := s.Renderer.(BatchRenderer); ok {
		shots, err := br.RenderAll(ctx, pages)
		if err != nil {
			return nil, fmt.Errorf("frontend: rendering %d pages: %w", len(pages), err)
		}
		if len(shots) != len(pages) {
			return nil, fmt.Errorf("frontend: the renderer returned %d screenshots for %d pages", len(shots), len(pages))
		}
		return shots, nil
	}
	shots := make([][]byte, len(pages))
	for i, p := range pages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if shots[i], err = s.Renderer.Render(ctx, p); err != nil {
			return nil, fmt.Errorf("frontend: %s: %w", name(i), err)
		}
	}
	return shots, nil
}

// decodePNG decodes a screenshot.
func decodePNG(shot []byte) (image.Image, error) {
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
