package clip

import (
	"encoding/binary"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/safetensors"
)

// The golden files are written by scripts/clip_golden.py: a random-weight
// tower of ViT-B/32's architecture (hidden 64, 2 layers, 4 heads, patch 32,
// image 224, projection 32), four images, PIL's resized and cropped
// pixels, and PyTorch's embeddings.

const testdataDir = "testdata"

// goldenImages are the test images: 320×200 RGB (downscaled), 90×130 RGBA
// with partial transparency (upscaled), 256×600 RGB (downscaled, cropped
// vertically), 224×360 grayscale (not resized: only cropped).
var goldenImages = []string{"img0", "img1", "img2", "img3"}

// embedTol is the largest difference allowed between an embedding element
// and PyTorch's, in f32.
const embedTol = 1e-4

func decodePNG(t *testing.T, name string) image.Image {
	t.Helper()
	f, err := os.Open(filepath.Join(testdataDir, name+".png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s.png: %v", name, err)
	}
	return img
}

// goldenF32 reads an f32 tensor of golden.safetensors.
func goldenF32(t *testing.T, name string) ([]float32, []int64) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(testdataDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, info, err := f.Data(name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out, info.Shape
}

// goldenPixels is PyTorch's input: PIL's crop of each image, normalised by
// NumPy (the golden table of each channel and byte).
func goldenPixels(t *testing.T) []Pixels {
	t.Helper()
	lut, _ := goldenF32(t, "pixel_lut")
	var out []Pixels
	for _, name := range goldenImages {
		crop := decodePNG(t, name+"_crop")
		px := make(Pixels, 3*224*224)
		for y := range 224 {
			for x := range 224 {
				c := color8(crop, x, y)
				for ch := range 3 {
					px[ch*224*224+y*224+x] = lut[ch*256+int(c[ch])]
				}
			}
		}
		out = append(out, px)
	}
	return out
}

// color8 returns a pixel of an opaque image as 8-bit RGB.
func color8(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

// TestResizeCropMatchesPIL checks the resized and cropped 8-bit pixels
// against PIL's, exactly.
func TestResizeCropMatchesPIL(t *testing.T) {
	for _, name := range goldenImages {
		t.Run(name, func(t *testing.T) {
			got, err := resizeCropImage(decodePNG(t, name), 224)
			if err != nil {
				t.Fatal(err)
			}
			want := decodePNG(t, name+"_crop")
			if b := want.Bounds(); b.Dx() != 224 || b.Dy() != 224 || got.w != 224 || got.h != 224 {
				t.Fatalf("sizes: got %d×%d, PIL's %v", got.w, got.h, b)
			}
			bad, worst := 0, 0
			for y := range 224 {
				for x := range 224 {
					w := color8(want, x, y)
					for c := range 3 {
						d := int(got.pix[3*(y*224+x)+c]) - int(w[c])
						if d != 0 {
							bad++
							worst = max(worst, d, -d)
						}
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ from PIL's, by up to %d", bad, 3*224*224, worst)
			}
		})
	}
}

// TestPreprocessMatchesNumPy checks the normalised pixels against the
// values NumPy computes, bit for bit.
func TestPreprocessMatchesNumPy(t *testing.T) {
	want := goldenPixels(t)
	for i, name := range goldenImages {
		got, err := Preprocess(decodePNG(t, name))
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d pixel values differ from the golden's", name, bad, len(got))
		}
	}
}

func TestPreprocessEmpty(t *testing.T) {
	if _, err := Preprocess(image.NewRGBA(image.Rect(0, 0, 0, 5))); err == nil {
		t.Error("Preprocess of an empty image: no error")
	}
	if _, err := PreprocessSize(image.NewRGBA(image.Rect(0, 0, 5, 5)), 0); err == nil {
		t.Error("PreprocessSize to 0 pixels: no error")
	}
}

// checkGolden loads the random-weight tower on b and compares the
// embeddings of the golden pixels, and of the images preprocessed here,
// with PyTorch's.
func checkGolden(t *testing.T, b engine.Backend) {
	m, err := Load(b, testdataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, shape := goldenF32(t, "embeds")
	if int(shape[0]) != len(goldenImages) || int(shape[1]) != m.Config.Projection {
		t.Fatalf("golden embeddings of shape %v", shape)
	}
	imgs := make([]image.Image, len(goldenImages))
	for i, name := range goldenImages {
		imgs[i] = decodePNG(t, name)
	}
	fromImages, err := m.Embed(imgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  [][]float32
	}{{"golden pixels", m.EmbedPixels(goldenPixels(t))}, {"preprocessed here", fromImages}} {
		var worst float64
		for i := range tc.got {
			for j, v := range tc.got[i] {
				worst = max(worst, math.Abs(float64(v)-float64(want[i*m.Config.Projection+j])))
			}
		}
		t.Logf("%s, %s: max abs error %.3g", b.Name(), tc.name, worst)
		if !(worst <= embedTol) {
			t.Errorf("%s, %s: embeddings differ from PyTorch's by up to %.3g (tolerance %g)", b.Name(), tc.name, worst, embedTol)
		}
	}
	for i := range fromImages {
		if c := Cosine(fromImages[i], fromImages[i]); math.Abs(c-1) > 1e-12 {
			t.Errorf("cosine of image %d with itself = %.17g", i, c)
		}
	}
	// One image at a time gives the batch's embeddings.
	for i, px := range goldenPixels(t) {
		one := m.EmbedPixels([]Pixels{px})[0]
		for j := range one {
			if d := math.Abs(float64(one[j]) - float64(want[i*m.Config.Projection+j])); !(d <= embedTol) {
				t.Fatalf("image %d alone: element %d differs from PyTorch's by %.3g", i, j, d)
			}
		}
	}
}

func TestEmbedGoldenCPU(t *testing.T) { checkGolden(t, cpu.New(cpu.Options{})) }
