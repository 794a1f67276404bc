package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// newTestRenderer returns a Renderer closed at the end of the test, skipping
// when chromium (or, unless opts.NoTailwind, the Tailwind CLI) is absent.
func newTestRenderer(t *testing.T, opts Options) *Renderer {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("chromium not installed (scripts/setup.sh installs it)")
	}
	if !opts.NoTailwind {
		if _, err := FindTailwindCLI(); err != nil {
			t.Skipf("no Tailwind CLI (%v)", err)
		}
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	return img
}

func rgb(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

func TestRenderPixels(t *testing.T) {
	r := newTestRenderer(t, Options{})
	const img = "https://picsum.photos/id/48/300/200"
	ph := PlaceholderColor(img)
	tests := []struct {
		name  string
		html  string
		x, y  int
		want  [3]uint8
		width int // of the screenshot
		high  int
	}{
		{"tailwind v2 green is emerald", "<html>" + twV2Link + `<body class="m-0"><div class="bg-green-500 h-32"></div></body></html>`,
			10, 10, [3]uint8{16, 185, 129}, DefaultWidth, DefaultHeight},
		{"tailwind play script green", "<html><head>" + twPlay + `</head><body class="m-0"><div class="bg-green-500 h-32"></div></body></html>`,
			10, 10, [3]uint8{34, 197, 94}, DefaultWidth, DefaultHeight},
		{"no tailwind: classes do nothing", `<html><body style="margin:0;background:#fff"><div class="bg-green-500 h-32">x</div></body></html>`,
			600, 60, [3]uint8{255, 255, 255}, DefaultWidth, DefaultHeight},
		{"picsum placeholder", `<html><body style="margin:0"><img src="` + img + `" style="display:block"></body></html>`,
			150, 100, [3]uint8{ph.R, ph.G, ph.B}, DefaultWidth, DefaultHeight},
		{"full page is the document's height", `<html><body style="margin:0"><div style="height:3000px;background:#00f"></div></body></html>`,
			10, 2990, [3]uint8{0, 0, 255}, DefaultWidth, 3000},
		{"vh stays the viewport's", `<html><body style="margin:0"><div style="height:100vh;background:#f00"></div><div style="height:2000px;background:#0f0"></div></body></html>`,
			10, DefaultHeight + 5, [3]uint8{0, 255, 0}, DefaultWidth, DefaultHeight + 2000},
		{"wide page is as wide as its content", `<html><body style="margin:0"><div style="width:2000px;height:50px;background:#00f"></div></body></html>`,
			1990, 10, [3]uint8{0, 0, 255}, 2000, DefaultHeight},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := r.Render(context.Background(), tc.html)
			if err != nil {
				t.Fatal(err)
			}
			img := decode(t, b)
			if got := img.Bounds().Size(); got.X != tc.width || got.Y != tc.high {
				t.Errorf("screenshot is %v, want %d×%d", got, tc.width, tc.high)
			}
			if got := rgb(img, tc.x, tc.y); got != tc.want {
				t.Errorf("pixel (%d,%d) = %v, want %v", tc.x, tc.y, got, tc.want)
			}
		})
	}
}

func TestRenderDeterministic(t *testing.T) {
	r := newTestRenderer(t, Options{Tabs: 2})
	page := "<html>" + twV2Link + `<body class="bg-gray-100 p-8"><h1 class="text-3xl font-bold text-blue-600">Title</h1>
<img src="https://picsum.photos/id/12/400/200"><p class="mt-4 text-gray-700">Some text in a paragraph.</p></body></html>`
	pages, err := r.RenderAll(context.Background(), []string{page, page, page})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pages {
		if p.Err != nil {
			t.Fatalf("page %d: %v", i, p.Err)
		}
		if !bytes.Equal(p.PNG, pages[0].PNG) {
			t.Errorf("page %d differs from page 0", i)
		}
	}
	// Alone, the page's own CSS; in the batch, CSS compiled with other
	// pages: the same pixels.
	other := "<html>" + twV2Link + `<body class="bg-red-500"><div class="text-9xl p-16 bg-indigo-900">x</div></body></html>`
	batch, err := r.RenderAll(context.Background(), []string{other, page})
	if err != nil {
		t.Fatal(err)
	}
	if batch[1].Err != nil {
		t.Fatal(batch[1].Err)
	}
	if !bytes.Equal(batch[1].PNG, pages[0].PNG) {
		t.Error("a page renders differently when its Tailwind is compiled with another page's")
	}
}

// TestHostilePages renders, in one batch on two tabs, pages that loop, grow
// without end, open dialogs and windows, navigate away and reach for the
// network, each followed by a plain page; the plain pages must all render,
// and no request may reach the network.
func TestHostilePages(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body style="background:#f0f">reached</body></html>`)
	}))
	defer srv.Close()
	u := srv.URL
	timeout := 8 * time.Second
	r := newTestRenderer(t, Options{Tabs: 2, Timeout: timeout, NoTailwind: true, MaxHeight: 4096})

	// A hostile page paints its body pure blue before it misbehaves, where
	// it can; the outcome "rendered" checks that what misbehaved left the
	// page as it was: blue at (1000,600).
	const blue = `<body style="margin:0;background:#0000ff">`
	const (
		failed   = iota // the page must time out (and score black)
		either          // a race between the screenshot and the script
		rendered        // the page must render, blue
	)
	tests := []struct {
		name string
		html string
		want int
	}{
		{"infinite script loop", `<html>` + blue + `<script>while (true) {}</script></body></html>`, failed},
		{"infinite loop after load", `<html>` + blue + `<script>onload = () => setTimeout(() => { for (;;) {} }, 0)</script></body></html>`, either},
		{"huge DOM", `<html>` + blue + `<script>
			for (let i = 0; i < 3e7; i++) document.body.appendChild(document.createElement("div")).textContent = "row " + i;
			</script></body></html>`, failed},
		{"tall page", `<html>` + blue + `<div style="height:500000px"></div></body></html>`, rendered},
		{"alert confirm prompt print", `<html>` + blue + `<script>alert(1); confirm("ok?"); prompt("name?"); print();</script></body></html>`, rendered},
		{"alert restored from the prototype", `<html>` + blue + `<script>delete window.alert; window.alert = Window.prototype.alert; alert("x"); onbeforeunload = e => { e.preventDefault(); return "stay"; }</script></body></html>`, rendered},
		{"pop-ups", `<html>` + blue + `<script>window.open("` + u + `/popup"); Window.prototype.open.call(window, "` + u + `/popup2");</script><a id=a target=_blank href="` + u + `/popup3">x</a><script>document.getElementById("a").click()</script></body></html>`, rendered},
		{"navigation away", `<html>` + blue + `<script>location = "` + u + `/away";</script></body></html>`, rendered},
		{"navigation by reload and meta refresh", `<html><head><meta http-equiv="refresh" content="0; url=` + u + `/refresh"></head>` + blue + `<script>setTimeout(() => location.reload(), 0)</script></body></html>`, rendered},
		{"form submit", `<html>` + blue + `<form id=f action="` + u + `/form" method=post><input name=q value=1></form><script>document.getElementById("f").submit()</script></body></html>`, rendered},
		{"network requests", `<html><head><link rel=stylesheet href="` + u + `/style.css"><script src="` + u + `/script.js"></script></head>` + blue + `
			<img src="` + u + `/img.png"><img src="https://example.com/logo.png"><iframe src="` + u + `/frame"></iframe>
			<div style="background:url(` + u + `/bg.png)">x</div>
			<script>
			fetch("` + u + `/fetch").catch(() => {});
			const x = new XMLHttpRequest(); x.open("GET", "` + u + `/xhr"); x.send();
			navigator.sendBeacon("` + u + `/beacon", "x");
			new WebSocket("` + strings.Replace(u, "http", "ws", 1) + `/ws");
			new EventSource("` + u + `/sse");
			</script></body></html>`, rendered},
	}
	plain := `<html><body style="margin:0;background:#00ff00"><p>plain</p></body></html>`
	var pages []string
	for _, tc := range tests {
		pages = append(pages, tc.html, plain)
	}
	out, err := r.RenderAll(context.Background(), pages)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		h, p := out[2*i], out[2*i+1]
		if p.Err != nil {
			t.Errorf("%s: the plain page after it failed: %v", tc.name, p.Err)
		} else if got := rgb(decode(t, p.PNG), 5, 5); got != [3]uint8{0, 255, 0} {
			t.Errorf("%s: the plain page after it has %v at (5,5)", tc.name, got)
		}
		switch {
		case tc.want == failed && h.Err == nil:
			t.Errorf("%s: rendered; want a failure", tc.name)
		case tc.want == rendered && h.Err != nil:
			t.Errorf("%s: %v", tc.name, h.Err)
		case h.Err != nil:
			if !errors.Is(h.Err, ErrPageFailed) {
				t.Errorf("%s: error %v does not wrap ErrPageFailed", tc.name, h.Err)
			}
			t.Logf("%s: %v", tc.name, h.Err)
		default:
			img := decode(t, h.PNG)
			if got := img.Bounds().Dy(); got > r.Options().MaxHeight {
				t.Errorf("%s: screenshot %d pixels tall, above the cap %d", tc.name, got, r.Options().MaxHeight)
			}
			if got := rgb(img, 1000, 600); tc.want == rendered && got != [3]uint8{0, 0, 255} {
				t.Errorf("%s: pixel (1000,600) = %v, want the page's blue", tc.name, got)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the network", n)
	}
}

// chromiumProcesses counts the running processes of any Chromium on the
// machine, as pgrep chromium would (the crash handler included).
func chromiumProcesses() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); strings.HasPrefix(c, "chromium") || strings.HasPrefix(c, "chrome_crashpad") {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				if st := processState(pid); st != 'Z' && st != 'X' {
					n++
				}
			}
		}
	}
	return n
}

// TestHungBrowserReplaced stops the browser's process (SIGSTOP: alive, but
// answering nothing) after a first page, before the next: with two tabs the
// next page opens a new tab, with one it reuses the first's. Opening the
// tab, or the page, must give up at the page timeout, the browser be
// replaced, and the page render on the new one, instead of the render
// waiting forever or the page scoring as a failure.
func TestHungBrowserReplaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		tabs int
	}{
		{"while a tab opens", 2},
		{"while a page renders", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRenderer(t, Options{Tabs: tc.tabs, NoTailwind: true, Timeout: 3 * time.Second})
			page := `<html><body style="background:#00ff00">x</body></html>`
			if _, err := r.Render(context.Background(), page); err != nil {
				t.Fatal(err)
			}
			first := r.b
			if err := syscall.Kill(first.pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(first.pid, syscall.SIGKILL) })
			type result struct {
				png []byte
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				b, err := r.Render(context.Background(), page)
				done <- result{b, err}
			}()
			select {
			case res := <-done:
				if res.err != nil {
					t.Fatalf("with the browser stopped: %v", res.err)
				}
				if got := rgb(decode(t, res.png), 5, 5); got != [3]uint8{0, 255, 0} {
					t.Fatalf("with the browser stopped: pixel %v", got)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("with the browser stopped, Render had not returned after 60 s")
			}
			t.Logf("the page rendered on a new browser %.1f s after the old one stopped", time.Since(start).Seconds())
			if r.b == nil || r.b == first {
				t.Error("the stopped browser was not replaced")
			}
			if first.alive() {
				t.Error("the stopped browser was not killed")
			}
		})
	}
}

func TestBrowserRestartAndClose(t *testing.T) {
	before := chromiumProcesses()
	r := newTestRenderer(t, Options{Tabs: 2, NoTailwind: true})
	page := `<html><body style="background:#0000ff">x</body></html>`
	if _, err := r.Render(context.Background(), page); err != nil {
		t.Fatal(err)
	}
	first := r.b
	if n := len(first.processes()); n < 2 {
		t.Fatalf("the browser has %d processes; want the browser and its children", n)
	}
	// Kill the browser: the next page starts a new one.
	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, err := r.Render(context.Background(), page)
		if err != nil {
			t.Fatalf("after the browser died: %v", err)
		}
		if got := rgb(decode(t, b), 5, 5); got != [3]uint8{0, 0, 255} {
			t.Fatalf("after the browser died: pixel %v", got)
		}
	}
	second := r.b
	if second == nil || second == first || second.pid == first.pid {
		t.Fatal("no new browser after the first died")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(first.processes()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := first.processes(); len(left) > 0 {
		t.Errorf("processes %v of the dead browser are left", left)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left := second.processes(); len(left) > 0 {
		t.Errorf("processes %v are left after Close", left)
	}
	if after := chromiumProcesses(); after > before {
		t.Errorf("%d Chromium processes ran before New, %d after Close", before, after)
	}
	if _, err := r.Render(context.Background(), page); err == nil {
		t.Error("Render after Close succeeded")
	}
}
