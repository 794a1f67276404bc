// Package sass reads what the CUDA toolkit reports of compiled kernels —
// the machine code `cuobjdump -sass` prints and the register report of
// `ptxas -v` — so that tests can hold the kernels to properties no result
// shows: that a kernel does not spill, that its shared-memory fragment
// loads are issued far enough ahead of the instructions that read them,
// that its global accesses are as wide as its source asks and issued
// together, and that its loops are as short as they are; Report (run by
// cmd/sassreport) shows the same for every kernel.
// It models only what those checks need: an instruction's opcode and the
// general registers it writes and reads.
package sass

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Instr is one machine instruction.
type Instr struct {
	Addr int    // its address in the function
	Op   string // the opcode with its modifiers, e.g. "LDSM.16.M88.4"
	Args string // the operands as printed, without the predicate and the ';'
}

// Function is one kernel's machine code, in address order.
type Function struct {
	Name string // the mangled name
	Code []Instr
}

var (
	funcLine  = regexp.MustCompile(`^\s*Function : (\S+)`)
	instrLine = regexp.MustCompile(`^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);`)
	target    = regexp.MustCompile(`0x([0-9a-f]+)\s*$`)
	regToken  = regexp.MustCompile(`\bR(\d+)(\.64)?\b`)
)

// Parse reads the output of `cuobjdump -sass`: every function it lists,
// each with its instructions. Output without a function is an error.
func Parse(r io.Reader) ([]Function, error) {
	var fns []Function
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := funcLine.FindStringSubmatch(line); m != nil {
			fns = append(fns, Function{Name: m[1]})
			continue
		}
		if m := instrLine.FindStringSubmatch(line); m != nil && len(fns) > 0 {
			f := &fns[len(fns)-1]
			addr, _ := strconv.ParseInt(m[1], 16, 64)
			f.Code = append(f.Code, Instr{Addr: int(addr), Op: m[2], Args: strings.TrimSpace(m[3])})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading machine code: %w", err)
	}
	if len(fns) == 0 {
		return nil, fmt.Errorf("no function in the machine code (want the output of cuobjdump -sass)")
	}
	return fns, nil
}

// Find returns the functions whose mangled names begin with prefix.
func Find(fns []Function, prefix string) []Function {
	var out []Function
	for _, f := range fns {
		if strings.HasPrefix(f.Name, prefix) {
			out = append(out, f)
		}
	}
	return out
}

// regs lists the registers operand tok names, width registers from
// the one named (R12.64 names two).
func regs(tok string, width int) []int {
	var out []int
	for _, m := range regToken.FindAllStringSubmatch(tok, -1) {
		n, _ := strconv.Atoi(m[1])
		w := width
		if m[2] != "" && w < 2 {
			w = 2
		}
		for i := 0; i < w; i++ {
			out = append(out, n+i)
		}
	}
	return out
}

// Writes lists the general registers the instruction writes: its first
// operand, as wide as the opcode says (an ldmatrix of 2 or 4 matrices fills
// 2 or 4 consecutive registers; an mma m16n8k16 its 4 accumulators).
// Stores, branches, barriers and reductions write none.
func (in Instr) Writes() []int {
	if strings.HasPrefix(in.Op, "ST") || strings.HasPrefix(in.Op, "BRA") || strings.HasPrefix(in.Op, "BAR") ||
		strings.HasPrefix(in.Op, "LDGSTS") || strings.HasPrefix(in.Op, "RED") {
		return nil
	}
	ops := strings.Split(in.Args, ",")
	return regs(ops[0], width(in.Op, 0))
}

// Reads lists the general registers the instruction reads: every operand
// after the first, and the first too for the instructions that write none
// (a store's address and value). An mma m16n8k16 reads 4 registers of A, 2
// of B and 4 of C.
func (in Instr) Reads() []int {
	ops := strings.Split(in.Args, ",")
	first := 1
	if in.Writes() == nil {
		first = 0
	}
	var out []int
	for i := first; i < len(ops); i++ {
		out = append(out, regs(ops[i], width(in.Op, i))...)
	}
	return out
}

// width is how many consecutive registers operand i of op names.
func width(op string, i int) int {
	switch {
	case strings.HasPrefix(op, "HMMA.16816"):
		return [4]int{4, 4, 2, 4}[min(i, 3)]
	case strings.HasPrefix(op, "LDSM") && i == 0:
		switch {
		case strings.HasSuffix(op, ".4"):
			return 4
		case strings.HasSuffix(op, ".2"):
			return 2
		}
	case strings.HasPrefix(op, "LDG.") && i == 0:
		switch {
		case strings.Contains(op, ".128"):
			return 4
		case strings.Contains(op, ".64"):
			return 2
		}
	}
	return 1
}

// LoadUse returns, for each instruction of f whose opcode begins with op
// (e.g. "LDSM"), the number of instructions from it to the first later one
// that reads a register it wrote: 1 when the very next instruction does.
// The count is in address order, across branches; a load no instruction
// reads (within the rest of the function) gets 0.
func LoadUse(f Function, op string) []int {
	var out []int
	for i, in := range f.Code {
		if !strings.HasPrefix(in.Op, op) {
			continue
		}
		w := map[int]bool{}
		for _, r := range in.Writes() {
			w[r] = true
		}
		d := 0
	scan:
		for j := i + 1; j < len(f.Code); j++ {
			for _, r := range f.Code[j].Reads() {
				if w[r] {
					d = j - i
					break scan
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// LoadBatch returns the most instructions whose opcode begins with op
// (e.g. "LDG.") that f issues, in address order, before any of them is read:
// the loads a thread has in flight at once where the code runs straight
// through. A batch ends at the first instruction that reads a register one
// of its loads wrote; the next load starts a new one.
func LoadBatch(f Function, op string) int {
	pending, n, most := map[int]bool{}, 0, 0
	for _, in := range f.Code {
		for _, r := range in.Reads() {
			if pending[r] {
				most, n = max(most, n), 0
				clear(pending)
				break
			}
		}
		if strings.HasPrefix(in.Op, op) {
			for _, r := range in.Writes() {
				pending[r] = true
			}
			n++
		}
	}
	return max(most, n)
}

// Loops returns f's loops as ranges [first, last] of instruction indices:
// for each branch back to an instruction at or before it, the target and the
// branch. Nested loops give nested ranges.
func Loops(f Function) [][2]int {
	at := map[int]int{}
	for i, in := range f.Code {
		at[in.Addr] = i
	}
	var out [][2]int
	for i, in := range f.Code {
		if !strings.HasPrefix(in.Op, "BRA") {
			continue
		}
		m := target.FindStringSubmatch(in.Args)
		if m == nil {
			continue
		}
		a, _ := strconv.ParseInt(m[1], 16, 64)
		if j, ok := at[int(a)]; ok && j <= i {
			out = append(out, [2]int{j, i})
		}
	}
	return out
}

// WideAccesses counts f's 16-byte accesses of global memory: loads (LDG,
// read-only or not) and stores (STG) whose opcode says .128. A memory-bound
// kernel built on 16-byte packs has both where it reads and writes; nvcc
// splitting a pack's access into narrower ones (as it did to fill's stores
// once) leaves none.
func WideAccesses(f Function) (loads, stores int) {
	for _, in := range f.Code {
		if !strings.Contains(in.Op, ".128") {
			continue
		}
		switch {
		case strings.HasPrefix(in.Op, "LDG."):
			loads++
		case strings.HasPrefix(in.Op, "STG."):
			stores++
		}
	}
	return loads, stores
}

// PackLoop returns the length in instructions of f's shortest loop that
// holds a 16-byte global load (a memory-bound kernel's loop over its
// packs), or 0 when none does. Where issuing instructions, not the bytes,
// binds a kernel, that length is its cost per iteration.
func PackLoop(f Function) int {
	best := 0
	for _, l := range Loops(f) {
		n := l[1] - l[0] + 1
		for _, in := range f.Code[l[0] : l[1]+1] {
			if strings.HasPrefix(in.Op, "LDG.") && strings.Contains(in.Op, ".128") {
				if best == 0 || n < best {
					best = n
				}
				break
			}
		}
	}
	return best
}

// Summary is what this package reads of one kernel at a glance.
type Summary struct {
	Name                  string
	Instrs                int // instructions in the function
	PackLoop              int // PackLoop: the loop over 16-byte packs, or 0
	Longest               int // the longest loop's instructions, or 0 (the branch to itself that ends every function is none)
	LoadBatch             int // LoadBatch of its global loads
	WideLoads, WideStores int // WideAccesses
}

// Summarize reads f's Summary.
func Summarize(f Function) Summary {
	s := Summary{Name: f.Name, Instrs: len(f.Code), PackLoop: PackLoop(f), LoadBatch: LoadBatch(f, "LDG.")}
	for _, l := range Loops(f) {
		if l[1] > l[0] {
			s.Longest = max(s.Longest, l[1]-l[0]+1)
		}
	}
	s.WideLoads, s.WideStores = WideAccesses(f)
	return s
}

// Spill is one kernel's line of the ptxas report.
type Spill struct {
	Name, Arch          string // mangled name, "sm_90"
	Stores, Loads, Regs int    // bytes spilled to and reloaded from local memory; registers used
}

var (
	ptxasEntry = regexp.MustCompile(`Compiling entry function '(\S+)' for '(sm_\d+)'`)
	ptxasSpill = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasRegs  = regexp.MustCompile(`Used (\d+) registers`)
)

// ParsePtxas reads the report `ptxas -v` writes (nvcc -Xptxas=-v): each
// entry function's spills and registers, per architecture.
func ParsePtxas(r io.Reader) ([]Spill, error) {
	var out []Spill
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := ptxasEntry.FindStringSubmatch(line); m != nil {
			out = append(out, Spill{Name: m[1], Arch: m[2]})
			continue
		}
		if len(out) == 0 {
			continue
		}
		s := &out[len(out)-1]
		if m := ptxasSpill.FindStringSubmatch(line); m != nil {
			s.Stores, _ = strconv.Atoi(m[1])
			s.Loads, _ = strconv.Atoi(m[2])
		}
		if m := ptxasRegs.FindStringSubmatch(line); m != nil {
			s.Regs, _ = strconv.Atoi(m[1])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the ptxas report: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no entry function in the ptxas report (want the output of ptxas -v)")
	}
	return out, nil
}
