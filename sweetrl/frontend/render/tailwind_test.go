package render

import (
	"context"
	"strings"
	"testing"
)

const (
	twV2Link   = `<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">`
	twPlay     = `<script src="https://cdn.tailwindcss.com"></script>`
	twV3Link   = `<link rel="stylesheet" href='https://unpkg.com/tailwindcss@3.4.1/dist/tailwind.css'>`
	twCdnjsV1  = `<LINK REL=stylesheet HREF=https://cdnjs.cloudflare.com/ajax/libs/tailwindcss/1.9.6/tailwind.min.css>`
	twNotStyle = `<link rel="icon" href="https://tailwindcss.com/favicon.ico">`
)

func TestDetectTailwind(t *testing.T) {
	tests := []struct {
		html string
		want Flavor
	}{
		{"<html><body class='p-4'>x</body></html>", NoTailwind},
		{"<html>" + twV2Link + "<body></body></html>", TailwindV2},
		{"<html><head>" + twPlay + "</head></html>", TailwindV3},
		{"<html>" + twV3Link + "</html>", TailwindV3},
		{"<html>" + twCdnjsV1 + "</html>", TailwindV2},
		{"<html>" + twNotStyle + "</html>", NoTailwind},
		{"<html>" + twPlay + twV2Link + "</html>", TailwindV3},
		{"<html>" + twV2Link + twPlay + "</html>", TailwindV2},
	}
	for _, tc := range tests {
		if got := DetectTailwind(tc.html); got != tc.want {
			t.Errorf("DetectTailwind(%q) = %v, want %v", tc.html, got, tc.want)
		}
	}
}

func TestInlineTailwind(t *testing.T) {
	const css = "p{color:red}"
	tests := []struct {
		html, want string
	}{
		{"<html><body>x</body></html>", "<html><body>x</body></html>"},
		{"<html>\n" + twV2Link + "\n<body>x</body></html>", "<html>\n<style>p{color:red}</style>\n<body>x</body></html>"},
		{"<head>" + twPlay + "</head>", "<head><style>p{color:red}</style></head>"},
		{"<head>" + twPlay + twV2Link + twNotStyle + "</head>", "<head><style>p{color:red}</style>" + twNotStyle + "</head>"},
		{"<head><script src=\"https://cdn.tailwindcss.com?plugins=forms\" ></script ></head>", "<head><style>p{color:red}</style></head>"},
	}
	for _, tc := range tests {
		if got := InlineTailwind(tc.html, css); got != tc.want {
			t.Errorf("InlineTailwind(%q) =\n%q\nwant\n%q", tc.html, got, tc.want)
		}
	}
	if got := InlineTailwind(twPlay, "a{}</style><script>x</script>"); strings.Contains(got, "</style><script>") {
		t.Errorf("InlineTailwind let the CSS close its <style>: %q", got)
	}
}

// testTailwind returns the Tailwind compiler, skipping when the CLI is not
// installed.
func testTailwind(t *testing.T) *Tailwind {
	t.Helper()
	cli, err := FindTailwindCLI()
	if err != nil {
		t.Skipf("no Tailwind CLI (%v)", err)
	}
	tw, err := NewTailwind(cli)
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

func TestTailwindCompile(t *testing.T) {
	tw := testTailwind(t)
	pages := []string{
		`<div class="bg-green-500 p-4">a</div>`,
		`<div class="text-purple-600 md:w-1/2">b</div>`,
	}
	tests := []struct {
		flavor  Flavor
		want    []string // substrings of the CSS
		wantNot []string
	}{
		// Tailwind 2's green is emerald, its purple violet.
		{TailwindV2, []string{"16 185 129", "124 58 237", ".p-4{", ".md\\:w-1\\/2{"}, []string{"34 197 94"}},
		{TailwindV3, []string{"34 197 94", "147 51 234", ".p-4{", ".md\\:w-1\\/2{"}, []string{"16 185 129"}},
	}
	for _, tc := range tests {
		css, err := tw.Compile(context.Background(), tc.flavor, pages)
		if err != nil {
			t.Fatalf("%v: %v", tc.flavor, err)
		}
		for _, s := range tc.want {
			if !strings.Contains(css, s) {
				t.Errorf("%v: CSS lacks %q", tc.flavor, s)
			}
		}
		for _, s := range tc.wantNot {
			if strings.Contains(css, s) {
				t.Errorf("%v: CSS has %q", tc.flavor, s)
			}
		}
		if strings.Contains(css, ".bg-red-500") {
			t.Errorf("%v: CSS has a class no page uses", tc.flavor)
		}
	}
}
