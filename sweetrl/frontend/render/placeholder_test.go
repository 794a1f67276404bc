package render

import (
	"bytes"
	"image/png"
	"testing"
)

func TestPlaceholderSize(t *testing.T) {
	tests := []struct {
		url  string
		w, h int
		ok   bool
	}{
		{"https://picsum.photos/200/300", 200, 300, true},
		{"https://picsum.photos/200", 200, 200, true},
		{"https://picsum.photos/200/300?random=4", 200, 300, true},
		{"https://picsum.photos/200/300.jpg", 200, 300, true},
		{"https://picsum.photos/id/48/1200/400", 1200, 400, true},
		{"http://picsum.photos/id/1/640", 640, 640, true},
		{"https://picsum.photos/seed/cat/320/240.webp?grayscale&blur=2", 320, 240, true},
		{"https://source.unsplash.com/random/800x600/?nature", 800, 600, true},
		{"https://picsum.photos/id/10/800/600-estate", 0, 0, false},
		{"https://picsum.photos/0/300", 0, 0, false},
		{"https://picsum.photos/6000/300", 0, 0, false},
		{"https://picsum.photos/id//200/300", 0, 0, false},
		{"https://picsum.photos/", 0, 0, false},
		{"https://picsum.photos/a/b", 0, 0, false},
		{"https://picsum.photos/1/2/3", 0, 0, false},
		{"https://via.placeholder.com/32", 0, 0, false},
		{"https://example.com/200/300", 0, 0, false},
		{"file:///picsum.photos/200/300", 0, 0, false},
		{"data:image/png;base64,AAAA", 0, 0, false},
	}
	for _, tc := range tests {
		w, h, ok := PlaceholderSize(tc.url)
		if w != tc.w || h != tc.h || ok != tc.ok {
			t.Errorf("PlaceholderSize(%q) = %d, %d, %v; want %d, %d, %v", tc.url, w, h, ok, tc.w, tc.h, tc.ok)
		}
	}
}

func TestPlaceholderImage(t *testing.T) {
	urls := []string{
		"https://picsum.photos/id/48/120/80",
		"https://picsum.photos/id/49/120/80",
		"https://picsum.photos/120/80?random=1",
	}
	seen := map[[3]uint8]string{}
	for _, u := range urls {
		a, ok := Placeholder(u)
		if !ok {
			t.Fatalf("Placeholder(%q): not a placeholder", u)
		}
		b, _ := Placeholder(u)
		if !bytes.Equal(a, b) {
			t.Errorf("Placeholder(%q) differs between calls", u)
		}
		img, err := png.Decode(bytes.NewReader(a))
		if err != nil {
			t.Fatalf("Placeholder(%q): %v", u, err)
		}
		if got := img.Bounds().Size(); got.X != 120 || got.Y != 80 {
			t.Errorf("Placeholder(%q) is %v, want 120×80", u, got)
		}
		want := PlaceholderColor(u)
		r, g, bl, _ := img.At(60, 40).RGBA()
		if got := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}; got != [3]uint8{want.R, want.G, want.B} {
			t.Errorf("Placeholder(%q) pixel %v, want %v", u, got, want)
		}
		for _, c := range []uint8{want.R, want.G, want.B} {
			if c < 128 || c > 192 {
				t.Errorf("PlaceholderColor(%q) = %v, channel outside 160±32", u, want)
			}
		}
		key := [3]uint8{want.R, want.G, want.B}
		if prev, dup := seen[key]; dup {
			t.Errorf("PlaceholderColor(%q) = PlaceholderColor(%q) = %v", u, prev, want)
		}
		seen[key] = u
	}
	if c := PlaceholderColor("https://picsum.photos/200/300?grayscale"); c.R != c.G || c.G != c.B {
		t.Errorf("grayscale placeholder colour %v is not grey", c)
	}
	if _, ok := Placeholder("https://example.com/a.png"); ok {
		t.Error("Placeholder accepted a URL that is not picsum's")
	}
}

func TestBlackPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(BlackPNG()))
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != BlackSide || got.Y != BlackSide {
		t.Fatalf("BlackPNG is %v, want %d×%d", got, BlackSide, BlackSide)
	}
	for _, p := range [][2]int{{0, 0}, {100, 50}, {223, 223}} {
		if r, g, b, a := img.At(p[0], p[1]).RGBA(); r|g|b != 0 || a != 0xffff {
			t.Errorf("BlackPNG at %v = %d %d %d %d, want opaque black", p, r, g, b, a)
		}
	}
	if !bytes.Equal((Page{Err: ErrPageFailed}).Image(), BlackPNG()) {
		t.Error("a failed Page's Image is not BlackPNG")
	}
}
