package clip

import (
	"image"
	"image/color"
	"testing"

	"github.com/turnwise/turnwise/engine/cpu"
)

// BenchmarkEmbedViTB32 embeds a batch of 8 images with a random-weight
// ViT-B/32 tower on the CPU backend (preprocessing excluded), and reports
// the time per image and the images embedded per second.
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
	b.ReportMetric(float64(b.N*len(px))/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkEmbedScreenshots is what scoring a batch of frontend pages
// costs CLIP: 8 full-page screenshots of 1366×3000 pixels decoded as
// images, preprocessed and embedded by a random-weight ViT-B/32 tower on
// the CPU backend.
func BenchmarkEmbedScreenshots(b *testing.B) {
	m, err := NewRandom(cpu.New(cpu.Options{}), ViTB32, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	imgs := make([]image.Image, 8)
	for i := range imgs {
		img := image.NewRGBA(image.Rect(0, 0, 1366, 3000))
		for y := range 3000 {
			for x := range 1366 {
				img.SetRGBA(x, y, color.RGBA{uint8(x + i), uint8(y), uint8(x ^ y), 255})
			}
		}
		imgs[i] = img
	}
	b.ResetTimer()
	for range b.N {
		if _, err := m.Embed(imgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(imgs))/b.Elapsed().Seconds(), "images/s")
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
