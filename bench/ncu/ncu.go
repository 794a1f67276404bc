// Package ncu reads the hardware-counter profiles Nsight Compute writes
// (ncu --import REPORT --page raw --csv --print-units base) and sums each
// profiled kernel up in one row: where its time goes (the share of the SM's
// and the memory system's peak it sustained, the tensor pipe's, the
// occupancy it reached) and why its warps wait (the stall reasons with the
// most cycles per issued instruction). The GPU bundle's profile step writes
// one such file per kernel case; `train bench profile` prints the table.
//
// The raw page has one column per metric, named as ncu names them
// (gpu__time_duration.sum, sm__throughput.avg.pct_of_peak_sustained_elapsed
// …), a row of units under the header, and one row per profiled launch.
// Metrics a section did not collect, or this ncu version names otherwise,
// are left blank: the table never guesses.
package ncu

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Kernel is one profiled launch.
type Kernel struct {
	Case  string // the case it was profiled in (the file's name)
	Name  string // the kernel's demangled name, without its parameter list
	Grid  string // grid size, as ncu prints it: "(x, y, z)", or blocks in all (launch__grid_size)
	Block string // block size, likewise (launch__block_size)
	// Metrics are the numeric columns by metric name, converted to base
	// units (time in nanoseconds, sizes in bytes, shares in percent).
	Metrics map[string]float64
}

// Read parses one raw-page CSV. It is an error when the file has no header
// with a kernel name column, a row is malformed, or no launch was profiled.
func Read(r io.Reader, caseName string) ([]Kernel, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("ncu csv: %w", err)
	}
	// ncu may print lines of its own (==PROF== …) before the table.
	h := -1
	for i, row := range rows {
		if len(row) > 1 && row[0] == "ID" {
			h = i
			break
		}
	}
	if h < 0 {
		return nil, fmt.Errorf("ncu csv: no header row (a first column named \"ID\"): is this ncu --page raw --csv output?")
	}
	head := rows[h]
	col := func(names ...string) int {
		for _, n := range names {
			for i, c := range head {
				if c == n {
					return i
				}
			}
		}
		return -1
	}
	name := col("Kernel Name", "Function Name", "Demangled Name")
	if name < 0 {
		return nil, fmt.Errorf("ncu csv: the header names no kernel column (Kernel Name)")
	}
	grid, block := col("Grid Size"), col("Block Size")
	body, first := rows[h+1:], h+2 // first: the 1-based record number of body[0]
	var units []string
	if len(body) > 0 && body[0][0] == "" {
		units, body, first = body[0], body[1:], first+1
	}
	var ks []Kernel
	for i, row := range body {
		if len(row) != len(head) {
			return nil, fmt.Errorf("ncu csv: row %d has %d fields, the header %d", first+i, len(row), len(head))
		}
		k := Kernel{Case: caseName, Name: shortName(row[name]), Metrics: map[string]float64{}}
		if grid >= 0 {
			k.Grid = row[grid]
		}
		if block >= 0 {
			k.Block = row[block]
		}
		for j, c := range head {
			if !strings.Contains(c, "__") {
				continue // not a metric (ID, Process Name, …)
			}
			v, ok := number(row[j])
			if !ok {
				continue
			}
			if units != nil && j < len(units) {
				v = toBase(v, units[j])
			}
			k.Metrics[c] = v
		}
		// Versions whose raw page has no size columns have the metrics.
		if v, ok := k.Metrics["launch__grid_size"]; ok && k.Grid == "" {
			k.Grid = strconv.FormatFloat(v, 'f', -1, 64)
		}
		if v, ok := k.Metrics["launch__block_size"]; ok && k.Block == "" {
			k.Block = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("ncu csv: no kernel was profiled (did -k match a launch?)")
	}
	return ks, nil
}

// number parses a metric's value, which ncu may print with thousands
// separators; "n/a" and empty values are not numbers.
func number(s string) (float64, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// unitScale is what a value in each of ncu's units is multiplied by to be
// in nanoseconds (times) or bytes (sizes; ncu's prefixes are decimal).
var unitScale = map[string]float64{
	"usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9,
	"Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9, "KiB": 1024,
}

// toBase converts a value in unit ("Kbyte/block" counts as Kbyte) to
// nanoseconds or bytes; other units are kept.
func toBase(v float64, unit string) float64 {
	unit, _, _ = strings.Cut(unit, "/")
	if k, ok := unitScale[unit]; ok {
		return v * k
	}
	return v
}

// shortName drops a demangled name's return type and parameter list:
// "void attn_bwd_kernel<bf16, 128>(Args)" becomes "attn_bwd_kernel<bf16, 128>".
func shortName(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "void ")
	depth := 0
	for i, r := range s {
		switch r {
		case '<':
			depth++
		case '>':
			depth--
		case '(':
			if depth == 0 {
				return s[:i]
			}
		}
	}
	return s
}

// The columns of the table, each the first of its metric names this
// profile has (ncu's section files have named some metrics differently
// across versions).
var (
	mDuration   = []string{"gpu__time_duration.sum"}
	mSM         = []string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"}
	mMemory     = []string{"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"}
	mDRAM       = []string{"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"}
	mTensor     = []string{"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"}
	mAchieved   = []string{"sm__warps_active.avg.pct_of_peak_sustained_active"}
	mTheory     = []string{"sm__maximum_warps_per_active_cycle_pct"}
	mRegs       = []string{"launch__registers_per_thread"}
	mSmemDyn    = []string{"launch__shared_mem_per_block_dynamic"}
	mSmemStatic = []string{"launch__shared_mem_per_block_static"}
	mIssue      = []string{"smsp__average_warp_latency_per_inst_issued.ratio", "smsp__average_warps_issue_stalled_per_issue_active.ratio"}
	mConflicts  = []string{"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"}
	mWavefronts = []string{"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"}
	mSMCycles   = []string{"sm__cycles_elapsed.sum"}
)

// stallMetric matches the warp-state metrics: cycles a warp spent stalled
// for one reason, per issued instruction.
var stallMetric = regexp.MustCompile(`^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)(?:_per_issue_active)?\.ratio$`)

// metric returns the first of names k has.
func (k Kernel) metric(names []string) (float64, bool) {
	for _, n := range names {
		if v, ok := k.Metrics[n]; ok {
			return v, true
		}
	}
	return 0, false
}

// Stall is one stall reason and its cycles per issued instruction.
type Stall struct {
	Reason string
	Cycles float64
}

// Stalls returns k's stall reasons, most cycles first (ties by name), the
// issuing warp's own ("selected") left out.
func (k Kernel) Stalls() []Stall {
	var s []Stall
	for name, v := range k.Metrics {
		m := stallMetric.FindStringSubmatch(name)
		if m == nil || m[1] == "selected" {
			continue
		}
		s = append(s, Stall{m[1], v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].Cycles != s[j].Cycles {
			return s[i].Cycles > s[j].Cycles
		}
		return s[i].Reason < s[j].Reason
	})
	return s
}

// Header is the table's header row; Row gives a kernel's cells in its
// order.
var Header = []string{"case", "kernel", "grid", "block", "registers", "shared KiB", "µs", "SM %", "memory %", "DRAM %",
	"tensor %", "occupancy % (achieved / theoretical)", "cycles per issue", "shared wavefronts per SM cycle", "shared bank conflicts %",
	"top stalls (cycles per issue)"}

// Row returns k's cells, in Header's order; a metric the profile lacks is
// an empty cell.
func (k Kernel) Row() []string {
	f := func(names []string, format string, scale float64) string {
		if v, ok := k.metric(names); ok {
			return fmt.Sprintf(format, v*scale)
		}
		return ""
	}
	smem := ""
	if d, ok := k.metric(mSmemDyn); ok {
		st, _ := k.metric(mSmemStatic)
		smem = fmt.Sprintf("%.1f", (d+st)/1024)
	}
	occ := f(mAchieved, "%.1f", 1)
	if t := f(mTheory, "%.1f", 1); occ != "" && t != "" {
		occ += " / " + t
	}
	conf, busy := "", ""
	if w, ok := k.metric(mWavefronts); ok {
		if c, ok := k.metric(mSMCycles); ok && c > 0 {
			busy = fmt.Sprintf("%.2f", w/c)
		}
	}
	if c, ok := k.metric(mConflicts); ok {
		if w, ok := k.metric(mWavefronts); ok && w > 0 {
			conf = fmt.Sprintf("%.1f", 100*c/w)
		}
	}
	var top []string
	for i, s := range k.Stalls() {
		if i == 3 {
			break
		}
		top = append(top, fmt.Sprintf("%s %.2f", s.Reason, s.Cycles))
	}
	name := k.Name
	if len(name) > 90 {
		name = name[:87] + "…"
	}
	return []string{k.Case, "`" + name + "`", k.Grid, k.Block, f(mRegs, "%.0f", 1), smem, f(mDuration, "%.1f", 1e-3),
		f(mSM, "%.1f", 1), f(mMemory, "%.1f", 1), f(mDRAM, "%.1f", 1), f(mTensor, "%.1f", 1), occ, f(mIssue, "%.2f", 1),
		busy, conf, strings.Join(top, ", ")}
}

// WriteTable writes ks as one markdown table.
func WriteTable(w io.Writer, ks []Kernel) error {
	line := func(cells []string) string {
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		return "| " + strings.Join(cells, " | ") + " |\n"
	}
	var b strings.Builder
	b.WriteString(line(append([]string(nil), Header...)))
	sep := make([]string, len(Header))
	for i := range sep {
		sep[i] = "---"
		if i >= 4 && i < len(Header)-1 {
			sep[i] = "---:"
		}
	}
	b.WriteString("| " + strings.Join(sep, " | ") + " |\n")
	for _, k := range ks {
		b.WriteString(line(k.Row()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Brief is one line for k: its case, time and the shares that say what
// bounds it, and its top stall.
func (k Kernel) Brief() string {
	var parts []string
	add := func(label string, names []string, format string, scale float64) {
		if v, ok := k.metric(names); ok {
			parts = append(parts, fmt.Sprintf(label+" "+format, v*scale))
		}
	}
	add("", mDuration, "%.0f µs", 1e-3)
	add("SM", mSM, "%.0f%%", 1)
	add("memory", mMemory, "%.0f%%", 1)
	add("tensor", mTensor, "%.0f%%", 1)
	add("occupancy", mAchieved, "%.0f%%", 1)
	if s := k.Stalls(); len(s) > 0 {
		parts = append(parts, fmt.Sprintf("stall %s %.1f", s[0].Reason, s[0].Cycles))
	}
	return k.Case + ": " + strings.TrimSpace(strings.Join(parts, " "))
}
