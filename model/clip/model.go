package clip

import (
	"fmt"
	"image"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// The image tower, per image (· a matrix product, rows are tokens):
//
//	patches  p_j = the j-th P×P patch, flattened (channel, row, column),  j = 1 … g², g = S/P
//	embed    x_0 = class_embedding,  x_j = p_j·W_patchᵀ;  x = x + position_embedding
//	         h = layernorm(x)                                  pre_layrnorm
//	block    a = layernorm1(h)
//	         q, k, v = a·Wqᵀ + bq, a·Wkᵀ + bk, a·Wvᵀ + bv
//	         h = h + softmax(q·kᵀ/√Dh)·v·Woᵀ + bo              per head, non-causal
//	         a = layernorm2(h)
//	         h = h + quick_gelu(a·W1ᵀ + b1)·W2ᵀ + b2           quick_gelu(z) = z·σ(1.702·z)
//	output   e = layernorm_post(h_0)·W_projᵀ                   the class token; no bias
//
// All in f32. A batch of B images is packed into N = B·T rows, T = 1 + g²,
// and attention keeps the images apart with one sequence per image.

// MaxBatch is the most images EmbedPixels runs through the tower at once; larger
// batches are split. It bounds the activations (about 95 MB of f32
// buffers for ViT-B/32).
const MaxBatch = 32

// Model is CLIP's image tower on one backend. It is not safe for concurrent use
// (its forward runs on the backend and the activation pool it holds).
type Model struct {
	Config  Config
	Weights Weights
	b       engine.Backend
	pool    *engine.Pool // the forward's activations
}

// Close frees the model's weights and cached activations.
func (m *Model) Close() {
	m.Weights.Each(func(_ string, t *engine.Tensor) {
		if t != nil {
			m.b.FreeBuffer(t.Buffer())
		}
	})
	m.Weights = Weights{}
	m.pool.Trim()
}

// Pixels is one preprocessed image: [3, S, S] f32, channel-major, as
// Preprocess returns it.
type Pixels []float32

// Embed preprocesses images (see PreprocessSize) and returns their
// embeddings, as EmbedPixels does. An image with no pixels is an error.
func (m *Model) Embed(imgs []image.Image) ([][]float32, error) {
	px := make([]Pixels, len(imgs))
	for i, img := range imgs {
		var err error
		if px[i], err = PreprocessSize(img, m.Config.ImageSize); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
	}
	return m.EmbedPixels(px), nil
}

// EmbedPixels returns the image embeddings ([E] each, unnormalised, as
// get_image_features returns them) of preprocessed images. It panics if an
// image is not [3, S, S].
func (m *Model) EmbedPixels(px []Pixels) [][]float32 {
	out := make([][]float32, 0, len(px))
	for lo := 0; lo < len(px); lo += MaxBatch {
		out = append(out, m.embed(px[lo:min(lo+MaxBatch, len(px))])...)
	}
	return out
}

// embed runs one batch through the tower.
func (m *Model) embed(px []Pixels) [][]float32 {
	c, b, w := m.Config, m.b, &m.Weights
	nb, t, d, g := len(px), c.Tokens(), c.Hidden, c.Grid()
	n, np := nb*t, g*g // rows: tokens, and patches per image
	var held []*engine.Tensor
	take := func(dt engine.DType, shape ...int) *engine.Tensor {
		x := m.pool.MustGet(dt, shape...)
		held = append(held, x)
		return x
	}
	defer func() {
		for _, x := range held {
			m.pool.Put(x)
		}
	}()

	patches := take(engine.F32, nb*np, c.PatchLen()) // [B·g², 3·P·P]
	engine.SetF32(b, patches, m.patches(px))
	x := take(engine.F32, n, d) // [N, D] embeddings
	for i := range nb {
		img := x.Rows(i*t, (i+1)*t)
		b.Copy(img.Rows(0, 1), w.ClassEmbed)
		b.Gemm(img.Rows(1, t), patches.Rows(i*np, (i+1)*np), w.PatchEmbed, engine.GemmParams{TransB: true, Alpha: 1})
		b.Add(img, img, w.PosEmbed)
	}
	h := take(engine.F32, n, d) // [N, D] the residual stream
	mean := take(engine.F32, n) // [N] LayerNorm statistics
	rstd := take(engine.F32, n) // [N]
	b.LayerNorm(h, mean, rstd, x, w.PreNormW, w.PreNormB, c.NormEps)

	a := x                                           // [N, D] a block's normalised input (x is free now)
	q := take(engine.F32, n, c.Heads, c.HeadDim())   // [N, H, Dh]
	k := take(engine.F32, n, c.Heads, c.HeadDim())   // [N, H, Dh]
	v := take(engine.F32, n, c.Heads, c.HeadDim())   // [N, H, Dh]
	att := take(engine.F32, n, c.Heads, c.HeadDim()) // [N, H, Dh]
	lse := take(engine.F32, n, c.Heads)              // [N, H]
	o := take(engine.F32, n, d)                      // [N, D] a half-block's output
	f := take(engine.F32, n, c.FFN)                  // [N, F] fc1's output
	gf := take(engine.F32, n, c.FFN)                 // [N, F] after quick_gelu
	seqs := take(engine.I32, nb, 4)                  // [B, 4] one sequence per image
	engine.SetI32(b, seqs, imageSeqs(nb, t))
	ap := engine.AttentionParams{Scale: float32(1 / math.Sqrt(float64(c.HeadDim()))), NonCausal: true}
	flat := func(x *engine.Tensor) *engine.Tensor { return x.Reshape(n, d) }
	for l := range w.Layers {
		lw := &w.Layers[l]
		b.LayerNorm(a, mean, rstd, h, lw.Norm1W, lw.Norm1B, c.NormEps)
		linear(b, flat(q), a, lw.Wq, lw.Bq)
		linear(b, flat(k), a, lw.Wk, lw.Bk)
		linear(b, flat(v), a, lw.Wv, lw.Bv)
		b.Attention(att, lse, q, k, v, seqs, ap)
		linear(b, o, flat(att), lw.Wo, lw.Bo)
		b.Add(h, h, o)

		b.LayerNorm(a, mean, rstd, h, lw.Norm2W, lw.Norm2B, c.NormEps)
		linear(b, f, a, lw.W1, lw.B1)
		b.GELU(gf, f, engine.GELUQuick)
		linear(b, o, gf, lw.W2, lw.B2)
		b.Add(h, h, o)
	}

	cls := take(engine.F32, nb, d) // [B, D] the class tokens
	for i := range nb {
		b.Copy(cls.Rows(i, i+1), h.Rows(i*t, i*t+1))
	}
	pooled := take(engine.F32, nb, d) // [B, D]
	b.LayerNorm(pooled, mean.Rows(0, nb), rstd.Rows(0, nb), cls, w.PostNormW, w.PostNormB, c.NormEps)
	e := take(engine.F32, nb, c.Projection) // [B, E]
	linear(b, e, pooled, w.Proj, nil)
	all := engine.ToF32(b, e)
	out := make([][]float32, nb)
	for i := range out {
		out[i] = all[i*c.Projection : (i+1)*c.Projection : (i+1)*c.Projection]
	}
	return out
}

// linear computes y = x·Wᵀ (+ bias when non-nil).
//
//	y [N, out], x [N, in], W [out, in], bias [out]
func linear(b engine.Backend, y, x, w, bias *engine.Tensor) {
	b.Gemm(y, x, w, engine.GemmParams{TransB: true, Alpha: 1})
	if bias != nil {
		b.AddBias(y, bias)
	}
}

// imageSeqs is the attention's sequence table of nb images of t tokens:
// image i's queries and keys are rows i·t … i·t+t−1.
func imageSeqs(nb, t int) []int32 {
	s := make([]int32, 0, 4*nb)
	for i := range nb {
		s = append(s, int32(i*t), int32(t), int32(i*t), int32(t))
	}
	return s
}

// patches cuts each image into g×g patches and flattens each in the order
// (channel, row, column) of the patch convolution's weight: row i·g²+r·g+q
// of the result is image i's patch at patch-row r, patch-column q.
//
//	result [B·g², 3·P·P]
func (m *Model) patches(px []Pixels) []float32 {
	c := m.Config
	s, p, g := c.ImageSize, c.Patch, c.Grid()
	out := make([]float32, 0, len(px)*g*g*c.PatchLen())
	for i, img := range px {
		if len(img) != 3*s*s {
			panic(fmt.Sprintf("clip: image %d has %d values, want 3×%d×%d", i, len(img), s, s))
		}
		for r := range g {
			for q := range g {
				for ch := range 3 {
					for y := range p {
						row := img[ch*s*s+(r*p+y)*s+q*p:]
						out = append(out, row[:p]...)
					}
				}
			}
		}
	}
	return out
}

// Cosine is the cosine similarity of two embeddings, computed in float64:
// a·b / (|a|·|b|), as CLIP compares L2-normalised embeddings. It is 0 when
// either is zero, and panics if their lengths differ.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("clip: Cosine of embeddings of lengths %d and %d", len(a), len(b)))
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
