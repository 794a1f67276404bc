package clip

import (
	"image"
	"image/color"
	"testing"

	"github.com/turnwise/turnwise/engine/cpu"
)

// BenchmarkEmbedViTB32 embeds a batch of 8 images with a random-weight
// ViT-B/32 tower on the CPU backend (preprocessing excluded).
func BenchmarkEmbedViTB32(b *testing.B) {
	m, err := NewRandom(cpu.New(cpu.Options{}), ViTB32, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	px := make([]Pixels, 8)
	for i := range px {
		px[i] = make(Pixels, 3*224*224)
		for j := range px[i] {
			px[i][j] = float32((i+j)%251)/125 - 1
		}
	}
	b.ResetTimer()
	for range b.N {
		m.EmbedPixels(px)
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N*len(px))*1e3, "ms/image")
}

// BenchmarkPreprocessScreenshot preprocesses a 1280×3000 full-page
// screenshot (downscaled by 5.7).
func BenchmarkPreprocessScreenshot(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 3000))
	for y := range 3000 {
		for x := range 1280 {
			img.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Preprocess(img); err != nil {
			b.Fatal(err)
		}
	}
}
