package clip

import "math"

// PIL's resampling of 8-bit images (Pillow's Resample.c), reproduced so
// that the resized pixels are PIL's to the bit. For each output pixel of a
// pass, with scale = in/out and fs = max(scale, 1) (a downscale widens the
// filter by the scale: antialiasing):
//
//	centre = (x + 0.5)·scale,  support = 2·fs
//	taps    i = int(centre − support + 0.5) … int(centre + support + 0.5) − 1, clipped to the image
//	weight  k_i = cubic((i − centre + 0.5)/fs), normalised to sum 1 (float64)
//	        cubic: Keys' kernel with a = −0.5
//	fixed   K_i = k_i·2²² rounded half away from zero to an int32
//	output  clamp((2²¹ + Σ K_i·v_i) >> 22, 0, 255)
//
// The horizontal pass runs first and its 8-bit result feeds the vertical
// pass; a pass whose size does not change is skipped. int() truncates
// toward zero as C's cast does, and the explicit float64 conversions keep
// the compiler from fusing multiply-adds, which PIL's build does not do.

// precisionBits is PIL's fixed-point precision of 8-bit resampling.
const precisionBits = 32 - 8 - 2

// bicubic is PIL's bicubic filter, a = −0.5, support 2.
func bicubic(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return float64(float64(float64((a+2)*x)-(a+3))*x)*x + 1
	}
	if x < 2 {
		return float64(float64(float64(float64(x-5)*x)+8)*x-4) * a
	}
	return 0
}

// taps are one pass's fixed-point coefficients: output pixel x reads
// input pixels lo[x] … lo[x]+n[x]−1 with weights k[x·size : x·size+n[x]].
type taps struct {
	size  int // the most taps of any output pixel
	lo, n []int
	k     []int32
}

// newTaps computes PIL's coefficients for resizing inSize pixels to
// outSize (precompute_coeffs and normalize_coeffs_8bpc).
func newTaps(inSize, outSize int) taps {
	scale := float64(inSize) / float64(outSize)
	fs := max(scale, 1)
	support := fs * 2
	size := int(math.Ceil(support))*2 + 1
	t := taps{size: size, lo: make([]int, outSize), n: make([]int, outSize), k: make([]int32, outSize*size)}
	w := make([]float64, size)
	for x := range outSize {
		centre := float64(float64(x)+0.5) * scale
		lo := max(int(centre-support+0.5), 0)
		hi := min(int(centre+support+0.5), inSize)
		var sum float64
		for i := lo; i < hi; i++ {
			w[i-lo] = bicubic(float64(float64(i)-centre+0.5) * (1 / fs))
			sum += w[i-lo]
		}
		k := t.k[x*size:]
		for i := range hi - lo {
			v := w[i]
			if sum != 0 {
				v /= sum
			}
			if v < 0 {
				k[i] = int32(-0.5 + float64(v*(1<<precisionBits)))
			} else {
				k[i] = int32(0.5 + float64(v*(1<<precisionBits)))
			}
		}
		t.lo[x], t.n[x] = lo, hi-lo
	}
	return t
}

// dot is output pixel x's value, with PIL's rounding and clip8, reading
// input pixel i at src[base+i·stride].
func (t *taps) dot(x int, src []uint8, base, stride int) uint8 {
	k := t.k[x*t.size : x*t.size+t.n[x]]
	ss := int32(1 << (precisionBits - 1))
	j := base + t.lo[x]*stride
	for _, w := range k {
		ss += int32(src[j]) * w
		j += stride
	}
	return uint8(min(max(ss>>precisionBits, 0), 255))
}

// rgb8 is an 8-bit RGB image, row-major, 3 bytes a pixel.
type rgb8 struct {
	w, h int
	pix  []uint8
}

// resizeCrop returns the window [x0, x0+cw) × [y0, y0+ch) of src resized
// to ow×oh by PIL's bicubic resampling. Only the pixels the window needs
// are computed; each is the value PIL computes for the whole image.
func resizeCrop(src rgb8, ow, oh, x0, y0, cw, ch int) rgb8 {
	img := src
	if ow != src.w { // horizontal pass over the input rows the window's output rows read
		ht := newTaps(src.w, ow)
		ylo, yhi := 0, src.h
		if oh != src.h {
			vt := newTaps(src.h, oh)
			ylo, yhi = vt.lo[y0], vt.lo[y0+ch-1]+vt.n[y0+ch-1]
		}
		tmp := rgb8{w: cw, h: src.h, pix: make([]uint8, 3*cw*src.h)}
		for y := ylo; y < yhi; y++ {
			for x := range cw {
				for c := range 3 {
					tmp.pix[3*(y*cw+x)+c] = ht.dot(x0+x, src.pix, 3*y*src.w+c, 3)
				}
			}
		}
		img, x0 = tmp, 0
	}
	out := rgb8{w: cw, h: ch, pix: make([]uint8, 3*cw*ch)}
	if oh == src.h {
		for y := range ch {
			copy(out.pix[3*y*cw:3*(y+1)*cw], img.pix[3*((y0+y)*img.w+x0):])
		}
		return out
	}
	vt := newTaps(src.h, oh)
	for y := range ch {
		for x := range cw {
			for c := range 3 {
				out.pix[3*(y*cw+x)+c] = vt.dot(y0+y, img.pix, 3*(x0+x)+c, 3*img.w)
			}
		}
	}
	return out
}
