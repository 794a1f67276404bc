package sass

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
)

// Report writes the Summary of every kernel of the static library lib for
// arch whose mangled or readable name matches the regular expression match,
// ignoring case (every kernel when it is empty), one line a kernel in the library's
// order, with its registers and spilled bytes from ptxas.log beside lib
// when that report is there. Members none of whose symbols match are not
// disassembled.
func Report(w io.Writer, lib, arch, match string) error {
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("%w (make kernels-cuda builds it)", err)
	}
	re, err := regexp.Compile("(?i)" + match)
	if err != nil {
		return fmt.Errorf("-match: %w", err)
	}
	spills := map[string]Spill{}
	if f, err := os.Open(filepath.Join(filepath.Dir(lib), "ptxas.log")); err == nil {
		list, err := ParsePtxas(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(filepath.Dir(lib), "ptxas.log"), err)
		}
		for _, s := range list {
			spills[s.Name+" "+s.Arch] = s
		}
	}
	members, err := Members(lib)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "instrs\tpack loop\tlongest loop\tload batch\t16B loads\t16B stores\tregs\tspill st/ld\t kernel")
	for _, m := range members {
		if !strings.HasSuffix(m, ".o") {
			continue
		}
		if match != "" {
			names, err := Symbols(lib, m)
			if err != nil {
				return err
			}
			if !matchesAny(re, append(names, demangle(names)...)) {
				continue
			}
		}
		fns, err := Disassemble(lib, m, arch)
		if err != nil {
			return err
		}
		names := make([]string, len(fns))
		for i, f := range fns {
			names[i] = f.Name
		}
		readable := demangle(names)
		for i, f := range fns {
			if !re.MatchString(f.Name) && !re.MatchString(readable[i]) {
				continue
			}
			s := Summarize(f)
			regs, spill := "", ""
			if p, ok := spills[f.Name+" "+arch]; ok {
				regs, spill = fmt.Sprint(p.Regs), fmt.Sprintf("%d/%d", p.Stores, p.Loads)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t %s\n", s.Instrs, s.PackLoop, s.Longest, s.LoadBatch,
				s.WideLoads, s.WideStores, regs, spill, readable[i])
		}
	}
	return tw.Flush()
}

func matchesAny(re *regexp.Regexp, names []string) bool {
	for _, n := range names {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}

// demangle returns the readable forms of C++ names by binutils' c++filt,
// or the names themselves where it is missing or fails.
func demangle(names []string) []string {
	cmd := exec.Command("c++filt")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(lines) != len(names) {
		return names
	}
	return lines
}
