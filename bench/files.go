package bench

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/turnwise/turnwise/internal/outfile"
)

// WriteResult writes r as JSON to jsonPath ("-": to w) and as markdown
// tables to mdPath, each when named, and the markdown to w when neither
// is.
func WriteResult(r *Result, jsonPath, mdPath string, w io.Writer) error {
	if jsonPath == "-" {
		if err := r.Encode(w); err != nil {
			return err
		}
	} else if jsonPath != "" {
		if err := r.Write(jsonPath); err != nil {
			return err
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, []string{"this run"}, []*Result{r}); err != nil {
		return err
	}
	if mdPath != "" {
		if err := outfile.WriteFile(mdPath, md.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", mdPath, err)
		}
	}
	if jsonPath == "" && mdPath == "" {
		_, err := w.Write(md.Bytes())
		return err
	}
	return nil
}

// ReportFiles reads the result files at paths (ours and the peers') and
// writes their side-by-side markdown report, each result named by its
// file's base name, to outPath, or to w when outPath is "".
func ReportFiles(paths []string, outPath string, w io.Writer) error {
	if len(paths) == 0 {
		return fmt.Errorf("no result files given")
	}
	var results []*Result
	var names []string
	for _, path := range paths {
		r, err := Read(path)
		if err != nil {
			return err
		}
		results, names = append(results, r), append(names, filepath.Base(path))
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, names, results); err != nil {
		return err
	}
	if outPath == "" {
		_, err := w.Write(md.Bytes())
		return err
	}
	if err := outfile.WriteFile(outPath, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", outPath, err)
	}
	return nil
}
