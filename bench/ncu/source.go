package ncu

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strings"
)

// The source page (ncu --import REPORT --page source --csv --print-source
// sass, of a report that collected the SourceCounters section) lists a
// kernel's machine code one instruction a row: its address, its SASS text,
// how often it executed, and how many of the warp-state samples the SMs
// took (a warp's program counter, at a fixed interval) found a warp waiting
// to issue it, in all and by stall reason. Where the samples pile up is
// where a kernel waits: on the HMMA whose ldmatrix operands have not
// arrived, at a barrier, in a spin on another block. The page starts with a
// line naming the kernel; a header row whose first column is "Address"
// follows, then the instructions.

// Source is one kernel's machine code with its samples.
type Source struct {
	Case    string   // the case it was profiled in (the file's name)
	Kernel  string   // the kernel's name, as the page gives it ("" when it does not)
	Reasons []string // the per-reason sample columns, as the page names them (stall_barrier, …)
	Insts   []Inst
}

// Inst is one instruction of a kernel's machine code.
type Inst struct {
	Address  string
	SASS     string             // the instruction's text, predicate and operands included
	Executed float64            // warp-level executions (0 when the page lacks the column)
	Samples  float64            // warp-state samples at this instruction
	Stalls   map[string]float64 // samples by reason (the Reasons' columns), zeros left out
}

// Opcode is an instruction's operation without its modifiers or predicate:
// "@!P0 HMMA.16816.F32.BF16 R4, …" is "HMMA".
func (i Inst) Opcode() string {
	f := strings.Fields(i.SASS)
	if len(f) > 0 && strings.HasPrefix(f[0], "@") {
		f = f[1:]
	}
	if len(f) == 0 {
		return "?"
	}
	op, _, _ := strings.Cut(f[0], ".")
	return strings.TrimSuffix(op, ";")
}

// IsSourcePage reports whether data looks like a source page (a row whose
// first field is "Address") rather than a raw page (first field "ID").
func IsSourcePage(data []byte) bool {
	for _, line := range bytes.SplitN(data, []byte("\n"), 8) {
		if f := strings.TrimSpace(string(line)); strings.HasPrefix(f, `"Address"`) || strings.HasPrefix(f, `"# Address"`) {
			return true
		}
	}
	return false
}

// ReadSource parses a source page. It is an error when the page has no
// header row, the header names no SASS text ("Source") or sample column
// ("Warp Stall Sampling (All Samples)"), a row is malformed, or no
// instruction is listed. Several kernels on one page (several launches)
// are read as one, their samples added: the profile step profiles one.
func ReadSource(r io.Reader, caseName string) (Source, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	rows, err := cr.ReadAll()
	if err != nil {
		return Source{}, fmt.Errorf("ncu source csv: %w", err)
	}
	s := Source{Case: caseName}
	var head []string
	var text, exec, all int // columns; the address is the first
	var reasons []int
	for i, row := range rows {
		first := strings.TrimPrefix(strings.TrimSpace(row[0]), "# ")
		switch {
		case first == "Address":
			head = row
			col := func(names ...string) int {
				for _, n := range names {
					for j, c := range head {
						if strings.TrimSpace(c) == n {
							return j
						}
					}
				}
				return -1
			}
			text, exec = col("Source"), col("Instructions Executed", "Warp Instructions Executed")
			all = col("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)", "Sampling Data (All)")
			if text < 0 {
				return Source{}, fmt.Errorf("ncu source csv: the header names no \"Source\" column (the instructions' text)")
			}
			if all < 0 {
				return Source{}, fmt.Errorf("ncu source csv: the header names no \"Warp Stall Sampling (All Samples)\" column: was the SourceCounters section collected?")
			}
			reasons, s.Reasons = nil, nil
			for j, c := range head {
				if c = strings.TrimSpace(c); strings.HasPrefix(c, "stall_") {
					reasons = append(reasons, j)
					s.Reasons = append(s.Reasons, c)
				}
			}
		case head == nil:
			if len(row) > 1 && strings.Contains(first, "Kernel") {
				s.Kernel = shortName(row[1])
			}
		case len(row) == 1 && strings.TrimSpace(row[0]) == "":
			// a blank line between kernels
		case len(row) != len(head):
			return Source{}, fmt.Errorf("ncu source csv: row %d has %d fields, the header %d", i+1, len(row), len(head))
		default:
			in := Inst{Address: strings.TrimSpace(row[0]), SASS: strings.TrimSpace(row[text]), Stalls: map[string]float64{}}
			in.Samples, _ = number(row[all])
			if exec >= 0 {
				in.Executed, _ = number(row[exec])
			}
			for k, j := range reasons {
				if v, ok := number(row[j]); ok && v != 0 {
					in.Stalls[s.Reasons[k]] = v
				}
			}
			s.Insts = append(s.Insts, in)
		}
	}
	if head == nil {
		return Source{}, fmt.Errorf("ncu source csv: no header row (a first column named \"Address\"): is this ncu --page source --csv output?")
	}
	if len(s.Insts) == 0 {
		return Source{}, fmt.Errorf("ncu source csv: no instruction listed")
	}
	return s, nil
}

// Samples is the kernel's samples in all.
func (s Source) Samples() float64 {
	var n float64
	for _, in := range s.Insts {
		n += in.Samples
	}
	return n
}

// Share is a part of a kernel's samples: an opcode's or an instruction's.
type Share struct {
	Name    string  // the opcode, or the instruction's address and SASS
	Samples float64 // samples in it
	Insts   int     // instructions it covers
	Stalls  map[string]float64
}

// topStalls writes the n reasons with the most samples, "reason share%"
// (shares of sh's samples), the "stall_" prefix dropped.
func (sh Share) topStalls(n int) string {
	type kv struct {
		k string
		v float64
	}
	var r []kv
	for k, v := range sh.Stalls {
		r = append(r, kv{k, v})
	}
	sort.Slice(r, func(i, j int) bool {
		if r[i].v != r[j].v {
			return r[i].v > r[j].v
		}
		return r[i].k < r[j].k
	})
	var out []string
	for i, x := range r {
		if i == n || sh.Samples <= 0 {
			break
		}
		out = append(out, fmt.Sprintf("%s %.0f%%", strings.TrimPrefix(x.k, "stall_"), 100*x.v/sh.Samples))
	}
	return strings.Join(out, ", ")
}

// ByOpcode sums the samples by opcode, most first (ties by name).
func (s Source) ByOpcode() []Share {
	m := map[string]*Share{}
	for _, in := range s.Insts {
		op := in.Opcode()
		sh := m[op]
		if sh == nil {
			sh = &Share{Name: op, Stalls: map[string]float64{}}
			m[op] = sh
		}
		sh.Samples += in.Samples
		sh.Insts++
		for k, v := range in.Stalls {
			sh.Stalls[k] += v
		}
	}
	out := make([]Share, 0, len(m))
	for _, sh := range m {
		out = append(out, *sh)
	}
	sortShares(out)
	return out
}

// Hottest returns the n instructions with the most samples, most first
// (ties by address).
func (s Source) Hottest(n int) []Share {
	out := make([]Share, 0, len(s.Insts))
	for _, in := range s.Insts {
		if in.Samples > 0 {
			out = append(out, Share{Name: in.Address + " " + in.SASS, Samples: in.Samples, Insts: 1, Stalls: in.Stalls})
		}
	}
	sortShares(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func sortShares(s []Share) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Samples != s[j].Samples {
			return s[i].Samples > s[j].Samples
		}
		return s[i].Name < s[j].Name
	})
}

// opcodeGloss says what the opcodes that matter most in our kernels do.
var opcodeGloss = map[string]string{
	"HMMA": "tensor-core product (waits here are mostly for its ldmatrix operands or the tensor pipe)",
	"LDSM": "ldmatrix", "LDS": "shared load", "STS": "shared store", "LDGSTS": "cp.async",
	"LDG": "global load", "STG": "global store", "RED": "global reduction (atomic)", "ATOMG": "global atomic",
	"BAR": "barrier", "DEPBAR": "cp.async wait", "MUFU": "special function (ex2)", "NANOSLEEP": "spin wait",
	"MEMBAR": "memory fence", "SHFL": "warp shuffle", "WARPSYNC": "warp sync", "BSYNC": "reconvergence",
}

// WriteSourceTables writes, for each kernel, where its samples lie: by
// opcode (the `top` with the most) and the `top` hottest instructions, each
// with its share of the samples and its top stall reasons.
func WriteSourceTables(w io.Writer, ss []Source, top int) error {
	var b strings.Builder
	for _, s := range ss {
		total := s.Samples()
		name := s.Case
		if s.Kernel != "" {
			name += " (`" + s.Kernel + "`)"
		}
		fmt.Fprintf(&b, "\n### %s: %.0f warp-state samples over %d instructions\n\n", name, total, len(s.Insts))
		if total <= 0 {
			b.WriteString("No samples: the report holds no source counters.\n")
			continue
		}
		pct := func(v float64) string { return fmt.Sprintf("%.1f", 100*v/total) }
		b.WriteString("| opcode | what | instructions | samples % | top stalls (% of its samples) |\n| --- | --- | ---: | ---: | --- |\n")
		for i, sh := range s.ByOpcode() {
			if i == top {
				break
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", sh.Name, opcodeGloss[sh.Name], sh.Insts, pct(sh.Samples), sh.topStalls(3))
		}
		b.WriteString("\n| instruction | samples % | top stalls (% of its samples) |\n| --- | ---: | --- |\n")
		for _, sh := range s.Hottest(top) {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", strings.ReplaceAll(sh.Name, "|", `\|`), pct(sh.Samples), sh.topStalls(3))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Brief is one line for s: its case and the opcodes that hold the most of
// its samples.
func (s Source) Brief() string {
	total := s.Samples()
	if total <= 0 {
		return s.Case + ": no samples"
	}
	var parts []string
	for i, sh := range s.ByOpcode() {
		if i == 4 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", sh.Name, 100*sh.Samples/total))
	}
	return s.Case + " sampled at: " + strings.Join(parts, " ")
}
