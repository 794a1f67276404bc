package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// proseLines returns a markdown document's lines with the lines of fenced
// code blocks (fences included) and the text of inline code spans blanked,
// so that what is left is prose: links and headings are found only there.
// Line numbers stay those of the document.
func proseLines(doc string) []string {
	lines := strings.Split(doc, "\n")
	out := make([]string, len(lines))
	for i, in := range fenced(lines) {
		if !in {
			out[i] = lines[i]
		}
	}
	return blankCodeSpans(out)
}

// blankCodeSpans replaces the inline code spans of markdown lines, backticks
// included, by spaces; a span may run over line breaks within a paragraph,
// as codeSpans reads them.
func blankCodeSpans(lines []string) []string {
	out := slices.Clone(lines)
	forParagraphs(lines, func(i int, para string) {
		b := []byte(para)
		for _, c := range paragraphSpans(para) {
			for x := c.open; x < c.close; x++ {
				if b[x] != '\n' {
					b[x] = ' '
				}
			}
		}
		copy(out[i:], strings.Split(string(b), "\n"))
	})
	return out
}

// fenced reports, for each line of a markdown document, whether it belongs
// to a fenced code block (the fences included).
func fenced(lines []string) []bool {
	out := make([]bool, len(lines))
	inFence := false
	var open string
	for i, l := range lines {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case !inFence:
				inFence, open = true, m[1]
				out[i] = true
				continue
			case strings.HasPrefix(m[1], open) && strings.TrimSpace(l) == m[1]:
				inFence = false
				out[i] = true
				continue
			}
		}
		out[i] = inFence
	}
	return out
}

// heading matches an ATX heading: its level's hashes and its text.
var heading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$`)

// inlineLink matches the target of an inline link or image, "](target)" or
// "](target "title")"; reference matches a link reference definition.
var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	reference  = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the anchors GitHub gives a markdown document's headings:
// the heading's text (a link's text in place of the link, emphasis and code
// marks dropped) in lower case, every character but letters, digits,
// spaces, '-' and '_' dropped, spaces turned into '-'; a repeated anchor
// gets "-1", "-2", … appended.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := strings.Split(doc, "\n")
	// Headings are prose: skip the fenced blocks (but keep code spans,
	// whose text is part of a heading's).
	in := fenced(lines)
	for i, l := range lines {
		if in[i] {
			continue
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := mdLink.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// link is a link target of a document and the line it is on.
type link struct {
	line   int
	target string
}

// docLinks returns the link targets of a markdown document's prose: inline
// links and images, and link reference definitions.
func docLinks(doc string) []link {
	var out []link
	for i, l := range proseLines(doc) {
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, link{i + 1, m[1]})
		}
		if m := reference.FindStringSubmatch(l); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// external reports whether a link target leaves the repository by a URL
// scheme (https:, mailto:) rather than naming a path.
var external = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// checkLinks returns a problem for each relative link of page (a path in
// fsys, the repository) that does not resolve: a target that is neither a
// file nor a directory of the repository relative to the page, one that
// leaves the repository, or an #anchor into a markdown file (the page
// itself for a bare #anchor) that no heading of that file makes.
func checkLinks(fsys fs.FS, page string) ([]string, error) {
	raw, err := fs.ReadFile(fsys, page)
	if err != nil {
		return nil, err
	}
	var problems []string
	docs := map[string]string{page: string(raw)}
	for _, l := range docLinks(string(raw)) {
		if l.target == "" || external.MatchString(l.target) {
			continue
		}
		file, frag, _ := strings.Cut(l.target, "#")
		target := page
		if file != "" {
			target = path.Join(path.Dir(page), file)
			if !fs.ValidPath(target) {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q leaves the repository", page, l.line, l.target))
				continue
			}
			if _, err := fs.Stat(fsys, target); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: no file or directory %s", page, l.line, l.target, target))
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		doc, ok := docs[target]
		if !ok {
			b, err := fs.ReadFile(fsys, target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", page, l.line, l.target, err))
				continue
			}
			doc = string(b)
			docs[target] = doc
		}
		if !anchors(doc)[frag] {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: no heading of %s has the anchor #%s", page, l.line, l.target, target, frag))
		}
	}
	return problems, nil
}

// checkPage returns the problems of one markdown page of fsys: each train
// command that names what its subcommand lacks (checkInvocations), and each
// relative link that does not resolve (checkLinks), every one naming the
// page and the line; and the number of train commands the page names.
func checkPage(fsys fs.FS, page string) ([]string, int, error) {
	raw, err := fs.ReadFile(fsys, page)
	if err != nil {
		return nil, 0, err
	}
	invs := readmeInvocations(string(raw))
	var problems []string
	for _, p := range checkInvocations(invs) {
		// "line N: train …" as page:N: train …, as a link's problem reads.
		problems = append(problems, fmt.Sprintf("%s:%s", page, strings.TrimPrefix(p, "line ")))
	}
	links, err := checkLinks(fsys, page)
	if err != nil {
		return nil, 0, err
	}
	return append(problems, links...), len(invs), nil
}

// docPages returns the documentation's pages in fsys: README.md and every
// markdown file of docs/.
func docPages(fsys fs.FS) ([]string, error) {
	pages, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		return nil, err
	}
	return append([]string{"README.md"}, pages...), nil
}

// TestReadmeCommands checks README.md and every page of docs/: every train
// command a page names runs a subcommand that exists with flags that
// subcommand has, spelt as --help lists them (no deprecated spellings),
// with values they take; every relative link resolves; and README.md links
// every page of docs/.
func TestReadmeCommands(t *testing.T) {
	root := os.DirFS("../..")
	if _, err := fs.Stat(root, "README.md"); err != nil {
		t.Skip("no README.md at the repository root (../../README.md)")
	}
	pages, err := docPages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("no pages in docs/ beside README.md: %v", pages)
	}
	// The least number of train commands each page must yield, so that a
	// change that stops the extraction does not pass as a page without
	// problems.
	minCommands := map[string]int{"README.md": 5, "docs/training.md": 5, "docs/multi-gpu.md": 5, "docs/colbench.md": 10}
	total := 0
	for _, page := range pages {
		t.Run(page, func(t *testing.T) {
			problems, n, err := checkPage(root, page)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			t.Logf("%s: %d train commands", page, n)
			if n < minCommands[page] {
				t.Errorf("%s: found only %d train commands, want at least %d", page, n, minCommands[page])
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
	if total < 40 {
		t.Errorf("found only %d train commands in %v", total, pages)
	}
	raw, err := fs.ReadFile(root, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range docLinks(string(raw)) {
		file, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(file)] = true
	}
	for _, page := range pages[1:] {
		if !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// TestDocsChecks checks that checkPage finds, in a small repository held in
// memory, a bad flag, a link to a missing file, a link leaving the
// repository and anchors no heading makes, and nothing in links that
// resolve or in code.
func TestDocsChecks(t *testing.T) {
	guide := "# Guide\n\n## The demo: `train demo`\n\n```sh\n# Not a heading\n```\n\n## Step 1 (of 2)\n\n## Step 1 (of 2)\n"
	tests := []struct {
		name     string
		page     string
		doc      string
		commands int
		problems []string // a substring of each problem, in order
	}{
		{
			name:     "links that resolve",
			page:     "README.md",
			doc:      "See [the guide](docs/guide.md), [its demo](docs/guide.md#the-demo-train-demo),\n[step 1](docs/guide.md#step-1-of-2) and [again](docs/guide.md#step-1-of-2-1),\n[the code](cmd/), [a file](cmd/x.go), ![a plot](docs/p.svg), [top](#top), [a site](https://example.com/x#y).\n\n# Top\n\n[ref]: docs/guide.md\n",
			problems: nil,
		},
		{
			name: "links in code are not links",
			page: "README.md",
			doc:  "`[x](missing.md)` and\n\n```\n[y](missing.md)\n```\n",
		},
		{
			name: "broken links",
			page: "docs/guide2.md",
			doc:  "# Guide 2\n\n[a](guide.md#no-such-heading)\nand [b](../nowhere.md), [c](../../outside.md),\n[d](#not-here), [e](guide.md#not-a-heading) [f](../cmd/x.go)\n",
			problems: []string{
				`docs/guide2.md:3: link "guide.md#no-such-heading": no heading of docs/guide.md has the anchor #no-such-heading`,
				`docs/guide2.md:4: link "../nowhere.md": no file or directory nowhere.md`,
				`docs/guide2.md:4: link "../../outside.md" leaves the repository`,
				`docs/guide2.md:5: link "#not-here": no heading of docs/guide2.md has the anchor #not-here`,
				`docs/guide2.md:5: link "guide.md#not-a-heading": no heading of docs/guide.md`,
			},
		},
		{
			name:     "a bad flag and a broken link",
			page:     "docs/jobs.md",
			doc:      "# Jobs\n\n```sh\ntrain sft --out runs/x --no-such-flag 1\n```\n\nThen `train eval --hf MODEL --json`, and see [the guide](guide.md#jobs).\n",
			commands: 2,
			problems: []string{"docs/jobs.md:4: train sft --out runs/x --no-such-flag 1: train sft has no --no-such-flag", `docs/jobs.md:7: link "guide.md#jobs": no heading of docs/guide.md`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"docs/guide.md": {Data: []byte(guide)},
				"docs/p.svg":    {Data: []byte("<svg/>")},
				"cmd/x.go":      {Data: []byte("package x\n")},
				tc.page:         {Data: []byte(tc.doc)},
			}
			problems, n, err := checkPage(fsys, tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.commands {
				t.Errorf("%d train commands, want %d", n, tc.commands)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d matching %q", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				if !strings.Contains(p, tc.problems[i]) {
					t.Errorf("problem %d: %q, want it to say %q", i, p, tc.problems[i])
				}
			}
		})
	}
}

// TestAnchors checks GitHub's anchors of headings.
func TestAnchors(t *testing.T) {
	got := anchors("# The tally family (pre-registered)\n## Measured on a GPU\n### The demo: `train demo`\n## Files in, files out\n## SWEET-RL and ColBench\n## A [linked](x.md) heading ##\n## Measured on a GPU\n")
	for _, want := range []string{"the-tally-family-pre-registered", "measured-on-a-gpu", "the-demo-train-demo", "files-in-files-out", "sweet-rl-and-colbench", "a-linked-heading", "measured-on-a-gpu-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
}
