package clip

import (
	"fmt"
	"image"
	"image/color"
)

// CLIP's normalisation (CLIPImageProcessor's image_mean and image_std), per
// channel R, G, B. Kept as float64 and rounded to float32 at run time, as
// NumPy rounds the Python floats.
var (
	imageMean = [3]float64{0.48145466, 0.4578275, 0.40821073}
	imageStd  = [3]float64{0.26862954, 0.26130258, 0.27577711}
)

// Preprocess is CLIPImageProcessor's preprocessing for a 224-pixel tower;
// see PreprocessSize.
func Preprocess(img image.Image) (Pixels, error) { return PreprocessSize(img, 224) }

// PreprocessSize turns an image into the tower's input as Hugging Face's
// CLIPImageProcessor does for openai/clip-vit-base-patch32, with size
// pixels where that uses 224:
//
//  1. convert_rgb: a pixel that is not opaque is composited over white
//     with PIL's alpha_composite arithmetic (8-bit, rounded as PIL rounds),
//     as current transformers does (older versions called PIL's
//     convert("RGB"), which drops alpha; both agree on opaque images such
//     as screenshots);
//  2. resize the shortest side to size, the other to
//     int(size·long/short), with PIL's BICUBIC resampling (see
//     bicubic.go), reproduced bit for bit;
//  3. centre crop size×size: top = (h − size)/2, left = (w − size)/2,
//     rounded down;
//  4. x = float32(v·(1/255)) with the product in float64, then
//     (x − mean)/std in float32 with CLIP's mean and std.
//
// The result is [3, size, size], channel-major. Pixels are read as 8-bit
// non-premultiplied RGBA (color.NRGBAModel): exact for the RGBA and NRGBA
// images Go's PNG decoder returns; for other colour models (a JPEG's
// YCbCr) the conversion to RGB is Go's, which may differ from PIL's by a
// unit. An image with no pixels is an error.
func PreprocessSize(img image.Image, size int) (Pixels, error) {
	crop, err := resizeCropImage(img, size)
	if err != nil {
		return nil, err
	}
	var lut [3][256]float32
	for c := range 3 {
		mean, std := float32(imageMean[c]), float32(imageStd[c])
		for v := range 256 {
			x := float32(float64(v) * (1.0 / 255))
			lut[c][v] = (x - mean) / std
		}
	}
	out := make(Pixels, 3*size*size)
	for i := range size * size {
		for c := range 3 {
			out[c*size*size+i] = lut[c][crop.pix[3*i+c]]
		}
	}
	return out, nil
}

// resizeCropImage is steps 1–3 of PreprocessSize: the 8-bit pixels of the
// resized and cropped image.
func resizeCropImage(img image.Image, size int) (rgb8, error) {
	if size <= 0 || size > MaxImageSize {
		return rgb8{}, fmt.Errorf("clip: image size %d is not in 1 … %d", size, MaxImageSize)
	}
	src := toRGB(img)
	if src.w <= 0 || src.h <= 0 {
		return rgb8{}, fmt.Errorf("clip: the image is empty (%d×%d pixels)", src.w, src.h)
	}
	short, long := src.w, src.h
	if src.w > src.h {
		short, long = src.h, src.w
	}
	newLong := int(float64(size*long) / float64(short))
	ow, oh := size, newLong
	if src.w > src.h {
		ow, oh = newLong, size
	}
	return resizeCrop(src, ow, oh, (ow-size)/2, (oh-size)/2, size, size), nil
}

// toRGB reads img as 8-bit RGB, compositing pixels that are not opaque
// over white as PIL's alpha_composite does.
func toRGB(img image.Image) rgb8 {
	r := img.Bounds()
	out := rgb8{w: r.Dx(), h: r.Dy()}
	if out.w <= 0 || out.h <= 0 {
		return rgb8{}
	}
	out.pix = make([]uint8, 3*out.w*out.h)
	i := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			var p color.NRGBA
			switch im := img.(type) {
			case *image.NRGBA:
				s := im.Pix[im.PixOffset(x, y):]
				p = color.NRGBA{s[0], s[1], s[2], s[3]}
			case *image.RGBA:
				s := im.Pix[im.PixOffset(x, y):]
				if s[3] == 255 {
					p = color.NRGBA{s[0], s[1], s[2], 255}
				} else {
					p = color.NRGBAModel.Convert(color.RGBA{s[0], s[1], s[2], s[3]}).(color.NRGBA)
				}
			default:
				p = color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			}
			out.pix[i], out.pix[i+1], out.pix[i+2] = overWhite(p.R, p.A), overWhite(p.G, p.A), overWhite(p.B, p.A)
			i += 3
		}
	}
	return out
}

// overWhite is one channel of PIL's alpha_composite of a pixel (value v,
// alpha a, not premultiplied) over opaque white, in PIL's integer
// arithmetic (7 extra bits, divisions by 255 rounded by shifts).
func overWhite(v, a uint8) uint8 {
	if a == 255 {
		return v
	}
	if a == 0 {
		return 255
	}
	const prec = 7
	sa := uint32(a)
	outa255 := sa*255 + 255*(255-sa) // the destination is opaque: always 255·255
	coef1 := sa * 255 * 255 * (1 << prec) / outa255
	coef2 := 255*(1<<prec) - coef1
	t := uint32(v)*coef1 + 255*coef2 + 0x80<<prec
	return uint8((((t >> 8) + t) >> 8) >> prec)
}
