package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// TailwindCLIPath is where scripts/setup-render.sh installs the Tailwind CSS
// command-line tool, relative to the repository root.
const TailwindCLIPath = "build/node/node_modules/.bin/tailwindcss"

// Flavor is the Tailwind build that a page links.
type Flavor int

const (
	// NoTailwind: the page links no Tailwind; it is rendered as written.
	NoTailwind Flavor = iota
	// TailwindV2 is a stylesheet link to a prebuilt Tailwind 1.x or 2.x CSS
	// file (as every ColBench ground truth has: tailwindcss@2.2.19 from
	// jsdelivr). Its classes are compiled with Tailwind 2's default colour
	// palette (gray, red, yellow = amber, green = emerald, blue, indigo,
	// purple = violet, pink), which is what that file holds.
	TailwindV2
	// TailwindV3 is the Tailwind play script (cdn.tailwindcss.com) or any
	// other Tailwind stylesheet link; its classes are compiled with Tailwind
	// 3's default configuration.
	TailwindV3
)

// String names the flavour.
func (f Flavor) String() string {
	switch f {
	case NoTailwind:
		return "none"
	case TailwindV2:
		return "tailwind-v2"
	case TailwindV3:
		return "tailwind-v3"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

var (
	// twLinkRe matches a <link> whose href names tailwind; group 1 is the href.
	twLinkRe = regexp.MustCompile(`(?is)<link\b[^>]*?\bhref\s*=\s*["']?([^"'\s>]*tailwind[^"'\s>]*)["']?[^>]*>`)
	// twScriptRe matches the Tailwind play script element; group 1 is its src.
	twScriptRe = regexp.MustCompile(`(?is)<script\b[^>]*?\bsrc\s*=\s*["']?([^"'\s>]*cdn\.tailwindcss\.com[^"'\s>]*)["']?[^>]*>\s*</script\s*>`)
	// twV2Re matches the version part of a Tailwind 1.x or 2.x stylesheet URL
	// (jsdelivr and unpkg write tailwindcss@2.2.19, cdnjs tailwindcss/2.2.19).
	twV2Re = regexp.MustCompile(`(?i)tailwind(?:css)?[@/]v?[12]\.`)
)

// tailwindTags returns the index pairs of the Tailwind elements of html in
// document order, and the flavour of the first.
func tailwindTags(html string) ([][2]int, Flavor) {
	var tags [][2]int
	first, flavor := -1, NoTailwind
	for _, m := range twLinkRe.FindAllStringSubmatchIndex(html, -1) {
		href := html[m[2]:m[3]]
		if !strings.Contains(strings.ToLower(href), ".css") {
			continue
		}
		tags = append(tags, [2]int{m[0], m[1]})
		if first < 0 || m[0] < first {
			first, flavor = m[0], TailwindV3
			if twV2Re.MatchString(href) {
				flavor = TailwindV2
			}
		}
	}
	for _, m := range twScriptRe.FindAllStringSubmatchIndex(html, -1) {
		tags = append(tags, [2]int{m[0], m[1]})
		if first < 0 || m[0] < first {
			first, flavor = m[0], TailwindV3
		}
	}
	// Document order, for Inline.
	for i := 1; i < len(tags); i++ {
		for j := i; j > 0 && tags[j][0] < tags[j-1][0]; j-- {
			tags[j], tags[j-1] = tags[j-1], tags[j]
		}
	}
	return tags, flavor
}

// DetectTailwind reports which Tailwind build html links.
func DetectTailwind(html string) Flavor {
	_, f := tailwindTags(html)
	return f
}

// InlineTailwind returns html with its first Tailwind element (stylesheet
// link or play script) replaced by a <style> element holding css, and any
// further Tailwind element removed. A page without one is returned as is.
func InlineTailwind(html, css string) string {
	tags, _ := tailwindTags(html)
	if len(tags) == 0 {
		return html
	}
	var b strings.Builder
	b.Grow(len(html) + len(css) + 16)
	prev := 0
	for i, t := range tags {
		if t[0] < prev { // overlapping match; already removed
			continue
		}
		b.WriteString(html[prev:t[0]])
		if i == 0 {
			b.WriteString("<style>")
			// A "</style" inside the CSS would end the element early.
			b.WriteString(strings.ReplaceAll(css, "</style", `<\/style`))
			b.WriteString("</style>")
		}
		prev = t[1]
	}
	b.WriteString(html[prev:])
	return b.String()
}

// Tailwind compiles pages' Tailwind classes to CSS with the Tailwind CSS v3
// command-line tool (the npm package tailwindcss, pinned in
// sweetrl/frontend/render/tailwind/package-lock.json).
type Tailwind struct {
	cli    string // the tailwindcss executable
	pkgDir string // its npm package directory, holding colors.js
}

// FindTailwindCLI looks for TailwindCLIPath in the working directory and its
// parents, and returns the first found.
func FindTailwindCLI() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("render: finding the Tailwind CLI: %w", err)
	}
	for {
		p := filepath.Join(dir, TailwindCLIPath)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("render: no %s in the working directory or a parent; run scripts/setup-render.sh", TailwindCLIPath)
		}
		dir = parent
	}
}

// NewTailwind returns a compiler that runs the tailwindcss executable cli,
// an npm install's node_modules/.bin/tailwindcss.
func NewTailwind(cli string) (*Tailwind, error) {
	real, err := filepath.EvalSymlinks(cli)
	if err != nil {
		return nil, fmt.Errorf("render: Tailwind CLI %s: %w", cli, err)
	}
	// real is node_modules/tailwindcss/lib/cli.js.
	pkg := filepath.Dir(filepath.Dir(real))
	if _, err := os.Stat(filepath.Join(pkg, "colors.js")); err != nil {
		return nil, fmt.Errorf("render: Tailwind CLI %s: not inside the tailwindcss npm package (no colors.js in %s)", cli, pkg)
	}
	return &Tailwind{cli: cli, pkgDir: pkg}, nil
}

// tailwindInput is the stylesheet the CLI expands: Tailwind's base
// (preflight), components and utilities, as the play script and the prebuilt
// files hold.
const tailwindInput = "@tailwind base;\n@tailwind components;\n@tailwind utilities;\n"

// Compile returns the minified CSS for the Tailwind classes used in pages,
// all of one flavour (TailwindV2 or TailwindV3), in one run of the CLI. CSS
// compiled for several pages styles each of them as its own would: Tailwind
// rules match by class and come in a fixed order whatever the content.
func (t *Tailwind) Compile(ctx context.Context, flavor Flavor, pages []string) (string, error) {
	dir, err := os.MkdirTemp("", "turnwise-tailwind-")
	if err != nil {
		return "", fmt.Errorf("render: compiling Tailwind: %w", err)
	}
	defer os.RemoveAll(dir)
	for i, p := range pages {
		name := filepath.Join(dir, fmt.Sprintf("page%06d.html", i))
		if err := os.WriteFile(name, []byte(p), 0o600); err != nil {
			return "", fmt.Errorf("render: compiling Tailwind: %w", err)
		}
	}
	glob, _ := json.Marshal(filepath.Join(dir, "*.html"))
	var config string
	switch flavor {
	case TailwindV3:
		config = fmt.Sprintf("module.exports = { content: [%s] };\n", glob)
	case TailwindV2:
		colors, _ := json.Marshal(filepath.Join(t.pkgDir, "colors"))
		config = fmt.Sprintf(`const colors = require(%s);
module.exports = {
  content: [%s],
  theme: {
    colors: {
      transparent: "transparent", current: "currentColor",
      black: colors.black, white: colors.white,
      gray: colors.gray, red: colors.red, yellow: colors.amber, green: colors.emerald,
      blue: colors.blue, indigo: colors.indigo, purple: colors.violet, pink: colors.pink,
    },
  },
};
`, colors, glob)
	default:
		panic(fmt.Sprintf("render: Tailwind.Compile with flavour %v", flavor))
	}
	cfg := filepath.Join(dir, "tailwind.config.js")
	in := filepath.Join(dir, "input.css")
	out := filepath.Join(dir, "output.css")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return "", fmt.Errorf("render: compiling Tailwind: %w", err)
	}
	if err := os.WriteFile(in, []byte(tailwindInput), 0o600); err != nil {
		return "", fmt.Errorf("render: compiling Tailwind: %w", err)
	}
	cmd := exec.CommandContext(ctx, t.cli, "-c", cfg, "-i", in, "-o", out, "--minify")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BROWSERSLIST_IGNORE_OLD_DATA=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("render: compiling Tailwind: %w", ctx.Err())
		}
		return "", fmt.Errorf("render: %s failed: %w: %s", t.cli, err, strings.TrimSpace(stderr.String()))
	}
	css, err := os.ReadFile(out)
	if err != nil {
		return "", fmt.Errorf("render: compiling Tailwind: %s wrote no CSS: %w", t.cli, err)
	}
	if len(css) == 0 {
		return "", errors.New("render: compiling Tailwind: empty CSS")
	}
	return string(css), nil
}
