package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/metrics"
)

// runPlot draws the loss and learning-rate curves of a metrics file as an
// SVG image.
func runPlot(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("plot", stderr)
	out := fs.StringP("out", "o", "", `SVG file to write, "-" for standard output (default: the metrics file's name with .svg)`)
	title := fs.String("title", "", "title of the image (default: the metrics file's name)")
	keys := fs.StringSliceP("metric", "y", nil, "metrics to draw, a panel each (such as loss,kl,mfu; default: loss and lr)")
	logY := fs.Bool("log-y", false, "draw the values on logarithmic axes (default metric: loss)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one metrics file, got %d arguments", fs.NArg())
	}
	in := fs.Arg(0)
	// Only SVG is drawn: a file named for another image format is refused
	// before anything is read, rather than filled with SVG.
	if ext := strings.ToLower(filepath.Ext(*out)); *out != "" && *out != "-" && ext != ".svg" {
		return fmt.Errorf("--out %s: plot writes SVG only; name the file .svg", *out)
	}
	var recs []metrics.Record
	var err error
	if in == "-" {
		recs, err = metrics.ReadFrom(stdin, "standard input")
		in = "standard input"
	} else {
		recs, err = metrics.Read(in)
	}
	if err != nil {
		return err
	}
	if *title == "" {
		*title = "Training curves: " + filepath.Base(in)
	}
	svg, err := metrics.PlotMetricsSVG(recs, *title, metrics.PlotOptions{Keys: *keys, LogY: *logY})
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	switch {
	case *out == "-":
		_, err = stdout.Write(svg)
		return err
	case *out == "" && fs.Arg(0) == "-":
		return errors.New("reading standard input: name the SVG file with -o")
	case *out == "":
		*out = strings.TrimSuffix(fs.Arg(0), filepath.Ext(fs.Arg(0))) + ".svg"
	}
	if err := outfile.WriteFile(*out, svg, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", *out)
	return nil
}
