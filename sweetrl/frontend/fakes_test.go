package frontend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"strings"
	"sync"

	"github.com/turnwise/turnwise/tokenizer"
)

// fakeRenderer renders a page as a solid image: the colour colours gives
// it, or else a grey whose level and height follow the page's length.
// The page "<html>hang</html>" renders black, as a page that times out
// does. It records the pages it rendered.
type fakeRenderer struct {
	colours map[string]color.RGBA
	fail    string // a page whose rendering fails

	mu    sync.Mutex
	pages []string
}

func (r *fakeRenderer) Render(ctx context.Context, html string) ([]byte, error) {
	r.mu.Lock()
	r.pages = append(r.pages, html)
	r.mu.Unlock()
	if html == r.fail {
		return nil, errors.New("browser died")
	}
	c, ok := r.colours[html]
	h := 8
	if !ok {
		g := uint8(len(html) % 256)
		c, h = color.RGBA{g, g, g, 255}, 8+len(html)%5
	}
	if html == "<html>hang</html>" {
		c = color.RGBA{0, 0, 0, 255}
	}
	img := image.NewRGBA(image.Rect(0, 0, 16, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(c), image.Point{}, draw.Src)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fakeEmbedder embeds an image as (mean red, mean green, mean blue, 1),
// each channel in [0, 1].
type fakeEmbedder struct{}

func (fakeEmbedder) Embed(imgs []image.Image) ([][]float32, error) {
	out := make([][]float32, len(imgs))
	for i, img := range imgs {
		b := img.Bounds()
		var sr, sg, sb float64
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				sr, sg, sb = sr+float64(r)/0xffff, sg+float64(g)/0xffff, sb+float64(bl)/0xffff
			}
		}
		n := float64(b.Dx() * b.Dy())
		out[i] = []float32{float32(sr / n), float32(sg / n), float32(sb / n), 1}
	}
	return out, nil
}

// scriptedAgent replies with its script in order and records the messages
// it was prompted with.
type scriptedAgent struct {
	script []string
	seen   [][]tokenizer.Message
}

func (a *scriptedAgent) Act(ctx context.Context, msgs []tokenizer.Message) (string, string, error) {
	n := len(a.seen)
	if n >= len(a.script) {
		return "", "", fmt.Errorf("scripted agent: no reply %d", n+1)
	}
	a.seen = append(a.seen, msgs)
	var in strings.Builder
	for _, m := range msgs {
		in.WriteString(m.Role + ": " + m.Content + "\n")
	}
	return in.String(), a.script[n], nil
}

// echoSimulator replies with a fixed text and records whether it was
// shown an agent screenshot.
type echoSimulator struct {
	reply  string
	shown  []bool
	target []byte
}

func (s *echoSimulator) Respond(ctx context.Context, agent, target []byte) (string, error) {
	s.shown = append(s.shown, agent != nil)
	s.target = target
	return s.reply, nil
}
