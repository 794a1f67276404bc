package render

import (
	"bytes"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"strconv"
	"strings"
)

// maxPlaceholderSide is the largest width or height that picsum.photos
// serves; a larger request gets no image.
const maxPlaceholderSide = 5000

// PlaceholderSize reports the size of the image that rawURL asks for when it
// is an image URL of picsum.photos — /W/H, /W (a square), /id/N/W[/H],
// /seed/S/W[/H], with an optional .jpg or .webp on the last part and any
// query (?random=N, ?grayscale, ?blur) — or of source.unsplash.com's
// /random/WxH, which the SWEET-RL reference rewrites to picsum. ok is false
// for any other URL, and for a malformed or oversized one.
func PlaceholderSize(rawURL string) (w, h int, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return 0, 0, false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch u.Hostname() {
	case "picsum.photos":
		if len(parts) >= 2 && (parts[0] == "id" || parts[0] == "seed") {
			if parts[1] == "" {
				return 0, 0, false
			}
			parts = parts[2:]
		}
		if len(parts) < 1 || len(parts) > 2 {
			return 0, 0, false
		}
		last := len(parts) - 1
		parts[last] = strings.TrimSuffix(strings.TrimSuffix(parts[last], ".jpg"), ".webp")
		w, okw := side(parts[0])
		h, okh := w, okw
		if len(parts) == 2 {
			h, okh = side(parts[1])
		}
		if !okw || !okh {
			return 0, 0, false
		}
		return w, h, true
	case "source.unsplash.com":
		if len(parts) < 2 || parts[0] != "random" {
			return 0, 0, false
		}
		ws, hs, found := strings.Cut(parts[1], "x")
		if !found {
			return 0, 0, false
		}
		w, okw := side(ws)
		h, okh := side(hs)
		if !okw || !okh {
			return 0, 0, false
		}
		return w, h, true
	}
	return 0, 0, false
}

// side parses one side of a placeholder: a decimal integer in
// [1, maxPlaceholderSide].
func side(s string) (int, bool) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPlaceholderSide {
		return 0, false
	}
	return n, true
}

// PlaceholderColor is the uniform colour of the placeholder for rawURL: a
// mid grey tinted by an FNV-1a hash of the whole URL (each channel within
// ±32 of 160), so that different images of a page differ and the same URL
// always gives the same colour. A URL that asks for ?grayscale gets the
// untinted grey.
func PlaceholderColor(rawURL string) color.RGBA {
	const base, spread = 160, 32
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("grayscale") {
		return color.RGBA{base, base, base, 255}
	}
	f := fnv.New32a()
	f.Write([]byte(rawURL))
	s := f.Sum32()
	ch := func(shift uint) uint8 {
		return uint8(base - spread + int(s>>shift)%(2*spread+1))
	}
	return color.RGBA{ch(0), ch(10), ch(20), 255}
}

// Placeholder returns the PNG that stands for the image at rawURL, and false
// when rawURL is not a placeholder URL (see [PlaceholderSize]).
func Placeholder(rawURL string) ([]byte, bool) {
	w, h, ok := PlaceholderSize(rawURL)
	if !ok {
		return nil, false
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h)) // [h][w] RGBA
	c := PlaceholderColor(rawURL)
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		panic("render: encoding a placeholder PNG in memory: " + err.Error())
	}
	return buf.Bytes(), true
}
