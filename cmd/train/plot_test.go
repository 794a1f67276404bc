package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// svgSeries parses an SVG document with encoding/xml and returns, for each
// series group (a g element with class "series"), its id and the number of
// polylines in it.
func svgSeries(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	series := map[string]int{}
	var stack []string // id of each open series group, "" for other elements
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("malformed SVG: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
				if root != "svg" || el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element %v; want svg in the SVG namespace", el.Name)
				}
			}
			id := ""
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if el.Name.Local == "g" && attrs["class"] == "series" {
				id = attrs["id"]
				series[id] += 0
			}
			if el.Name.Local == "polyline" && len(stack) > 0 && stack[len(stack)-1] != "" {
				if attrs["points"] == "" {
					t.Errorf("polyline of %s has no points", stack[len(stack)-1])
				}
				series[stack[len(stack)-1]]++
			}
			stack = append(stack, id)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	return series
}

func writeMetrics(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const sampleMetrics = `{"step":0,"loss":10.2,"lr":0,"eval_loss":10.3}
{"step":1,"loss":9.1,"lr":0.0001,"tokens_per_s":4000}
{"step":2,"loss":"NaN","lr":0.0002}

{"step":3,"loss":7.5,"lr":0.0003,"grad_norm":1.2}
{"step":4,"loss":6.9,"lr":0.00025,"eval_loss":7.4}
`

func TestPlot(t *testing.T) {
	tests := []struct {
		name, metrics string
		want          map[string]int
		wantText      []string
	}{
		{"all series", sampleMetrics, map[string]int{"loss": 1, "eval_loss": 1, "lr": 1},
			[]string{"training loss", "eval loss", "learning rate", "step"}},
		{"loss only", `{"step":5,"loss":3}` + "\n" + `{"step":9,"loss":2.5}`, map[string]int{"loss": 1}, []string{"training loss"}},
		{"single point", `{"step":7,"loss":3,"lr":1e-5}`, map[string]int{"loss": 1, "lr": 1}, []string{"<circle"}},
		{"eval only", `{"step":100,"eval_loss":3.25}`, map[string]int{"eval_loss": 1}, []string{"eval loss"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := writeMetrics(t, tc.metrics)
			var out, errOut bytes.Buffer
			if err := runPlot([]string{in, "-o", "-", "--title", "run <1> & co"}, nil, &out, &errOut); err != nil {
				t.Fatal(err)
			}
			got := svgSeries(t, out.Bytes())
			if len(got) != len(tc.want) {
				t.Errorf("series %v; want %v", got, tc.want)
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Errorf("series %q has %d polylines; want %d", k, got[k], n)
				}
			}
			s := out.String()
			for _, w := range append(tc.wantText, "run &lt;1&gt; &amp; co") {
				if !strings.Contains(s, w) {
					t.Errorf("SVG lacks %q", w)
				}
			}
		})
	}
}

func TestPlotToFile(t *testing.T) {
	in := writeMetrics(t, sampleMetrics)
	var out, errOut bytes.Buffer
	if err := runPlot([]string{in, "--title", "t"}, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	svgPath := strings.TrimSuffix(in, ".jsonl") + ".svg"
	doc, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatalf("default output: %v", err)
	}
	if len(svgSeries(t, doc)) != 3 || out.Len() != 0 {
		t.Errorf("bad default output; stdout %q", out.String())
	}
	other := filepath.Join(t.TempDir(), "loss.svg")
	if err := runPlot([]string{"-o", other, "--title", "t", "-"}, strings.NewReader(sampleMetrics), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if doc2, err := os.ReadFile(other); err != nil || !bytes.Equal(doc, doc2) {
		t.Errorf("reading standard input gave a different image (%v)", err)
	}
}

func TestPlotErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    func(dir string) []string
		metrics string
		want    []string
	}{
		{"empty file", nil, "", []string{"metrics.jsonl", "empty"}},
		{"blank lines only", nil, "\n\n", []string{"empty"}},
		{"bad json", nil, sampleMetrics + "{oops\n", []string{"metrics.jsonl:7:", "not a JSON object"}},
		{"no step", nil, `{"step":1,"loss":2}` + "\n" + `{"loss":2}`, []string{"metrics.jsonl:2:", `missing "step"`}},
		{"bad value", nil, `{"step":1,"loss":"x"}`, []string{"metrics.jsonl:1:", `"loss"`}},
		{"no loss", nil, `{"step":1,"lr":0.1}`, []string{"metrics.jsonl", "no finite"}},
		{"missing file", func(dir string) []string { return []string{filepath.Join(dir, "nope.jsonl"), "-o", "-"} }, "", []string{"nope.jsonl"}},
		{"no file", func(string) []string { return nil }, "", []string{"want one metrics file"}},
		{"two files", func(string) []string { return []string{"a", "b"} }, "", []string{"want one metrics file"}},
		{"stdin without -o", func(string) []string { return []string{"-"} }, "", []string{"-o"}},
		{"png", func(dir string) []string {
			return []string{writeMetrics(t, sampleMetrics), "-o", filepath.Join(dir, "loss.png")}
		}, "", []string{"loss.png", "SVG only"}},
		{"no extension", func(dir string) []string {
			return []string{writeMetrics(t, sampleMetrics), "-o", filepath.Join(dir, "loss")}
		}, "", []string{"SVG only"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := writeMetrics(t, tc.metrics)
			args := []string{in, "-o", "-"}
			if tc.args != nil {
				args = tc.args(t.TempDir())
			}
			var out, errOut bytes.Buffer
			err := runPlot(args, strings.NewReader(sampleMetrics), &out, &errOut)
			if err == nil {
				t.Fatalf("no error; output %q", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestPlotMetricLogY draws chosen metrics on logarithmic axes from the
// command line.
func TestPlotMetricLogY(t *testing.T) {
	in := writeMetrics(t, sampleMetrics)
	var out, errOut bytes.Buffer
	if err := runPlot([]string{in, "-o", "-", "-y", "loss,lr", "--log-y"}, nil, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	series := svgSeries(t, out.Bytes())
	if series["loss"] != 1 || series["lr"] != 1 || len(series) != 2 {
		t.Errorf("series %v, want loss and lr", series)
	}
	// The loss spans 6.9 … 10.2 (decades 1 … 100), lr 1e-4 … 3e-4 (1e-4 … 0.001).
	for _, tick := range []string{">1</text>", ">10</text>", ">100</text>", ">0.0001</text>", ">0.001</text>"} {
		if !strings.Contains(out.String(), tick) {
			t.Errorf("the SVG lacks the tick %s", tick)
		}
	}
	if err := runPlot([]string{in, "-o", "-", "-y", "kl"}, nil, &out, &errOut); err == nil || !strings.Contains(err.Error(), `"kl"`) {
		t.Errorf("an absent metric: error %v, want one naming it", err)
	}
}
