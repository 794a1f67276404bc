package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Peer implementation names, as the results carry them in Impl.
const (
	CuBLASLt    = "cublaslt"     // the vendor GEMM, measured by train bench beside ours
	TorchSDPA   = "torch-sdpa"   // torch.nn.functional.scaled_dot_product_attention
	TorchPEFT   = "pytorch-peft" // Hugging Face Llama + PEFT LoRA, trained by PyTorch
	TorchHF     = "pytorch-hf"   // Hugging Face Llama generating (prefill, decode)
	TorchMatmul = "torch-matmul" // torch.matmul: the peer's own GEMM ceiling
)

// The targets the report checks (issue 11): each is a ratio and the value
// it must reach.
const (
	TargetMemory    = 0.80 // memory-bound kernels over the copy bandwidth
	TargetGEMM      = 0.70 // our bf16 GEMM over cuBLASLt at the same shape
	TargetAttention = 0.50 // our attention forward over PyTorch SDPA
	TargetStep      = 1.00 // our LoRA step's tokens/s over PyTorch + PEFT's
)

// Merge combines results from several files into one view: the entries of
// all of them (the same name, implementation and GEMM twice is an error: our
// steps measured with cuBLASLt and with our own GEMM may sit side by side),
// and the
// ceilings of the first of our files. Steps without an MFU (the peers')
// get one against their GPU's data-sheet peak where SpecPeak knows it.
func Merge(results ...*Result) (*Result, error) {
	if len(results) == 0 {
		return nil, errors.New("no results to merge")
	}
	m := &Result{Schema: Schema, Meta: results[0].Meta}
	seen := map[string]bool{}
	key := func(kind, name, impl string) error {
		k := kind + "\x00" + name + "\x00" + impl
		if seen[k] {
			return fmt.Errorf("%s %s (%s) is in more than one file", kind, name, impl)
		}
		seen[k] = true
		return nil
	}
	for _, r := range results {
		if m.Ceilings.GEMM == nil && r.Meta.Impl == Ours {
			m.Ceilings.GEMM = r.Ceilings.GEMM
		}
		if m.Ceilings.Copy == nil && r.Meta.Impl == Ours {
			m.Ceilings.Copy = r.Ceilings.Copy
		}
		for _, k := range r.Kernels {
			if err := key("kernel", k.Name, k.Impl); err != nil {
				return nil, err
			}
			m.Kernels = append(m.Kernels, k)
		}
		for _, s := range r.Steps {
			if err := key("step", s.Name, s.Impl+gemmTag(s.GEMM)); err != nil {
				return nil, err
			}
			if tf, name, ok := SpecPeak(r.Meta.Device); ok && s.MFU == 0 && s.TFLOPs > 0 {
				// A peer's MFU, against the same data-sheet peak as ours.
				s.MFU, s.MFUPeak = s.TFLOPs/tf, name
			}
			m.Steps = append(m.Steps, s)
		}
		for _, g := range r.Generation {
			if err := key("generation", g.Name, g.Impl+gemmTag(g.GEMM)); err != nil {
				return nil, err
			}
			m.Generation = append(m.Generation, g)
		}
	}
	return m, nil
}

// WriteMarkdown writes the results of one run — ours and any peers', each
// file named in names — as markdown: where each was measured, the ceilings,
// the targets with their verdicts, and the kernels, training steps and
// generation side by side. Ratios are ours over the other, as throughputs
// (above 1: ours is faster).
func WriteMarkdown(w io.Writer, names []string, results []*Result) error {
	if len(names) != len(results) {
		panic(fmt.Sprintf("bench: WriteMarkdown of %d results with %d names", len(results), len(names)))
	}
	m, err := Merge(results...)
	if err != nil {
		return err
	}
	p := &printer{w: w}
	p.line("# turnwise benchmark\n")
	p.runs(names, results)
	p.ceilings(names, results)
	p.targets(m)
	p.kernels(m)
	p.steps(m)
	p.generation(m)
	p.profiles(m)
	return p.err
}

// printer writes markdown and keeps the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", a...)
	}
}

// table writes a markdown table; cells are escaped for pipes.
func (p *printer) table(head []string, rows [][]string) {
	esc := func(cells []string) string {
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		return "| " + strings.Join(out, " | ") + " |"
	}
	p.line("%s", esc(head))
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	p.line("|%s|", strings.Join(sep, "|"))
	for _, r := range rows {
		p.line("%s", esc(r))
	}
	p.line("")
}

func (p *printer) runs(names []string, results []*Result) {
	p.line("## Runs\n")
	var rows [][]string
	for i, r := range results {
		m := r.Meta
		commit := m.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if m.Modified {
			commit += " (modified)"
		}
		var vers []string
		for _, k := range sortedKeys(m.Versions) {
			vers = append(vers, k+" "+m.Versions[k])
		}
		status := "measured"
		if m.Skipped != "" {
			status = "skipped: " + m.Skipped
		}
		rows = append(rows, []string{names[i], m.Impl, m.Backend, ShortGEMM(m.GEMM), m.Device, m.Driver, m.Toolkit, commit, m.Date,
			m.Timer, strings.Join(vers, ", "), status})
	}
	p.table([]string{"file", "impl", "backend", "GEMM", "device", "driver", "toolkit", "commit", "date", "timer", "versions", "status"}, rows)
	for i, r := range results {
		for _, n := range r.Meta.Notes {
			p.line("- %s: %s", names[i], n)
		}
	}
	p.line("")
}

func (p *printer) ceilings(names []string, results []*Result) {
	var rows [][]string
	for i, r := range results {
		for _, c := range []*Kernel{r.Ceilings.GEMM, r.Ceilings.Copy} {
			if c == nil {
				continue
			}
			rows = append(rows, []string{names[i], c.Name, c.Impl, seconds(c.Median), c.Achieved()})
		}
	}
	if len(rows) == 0 {
		return
	}
	p.line("## Ceilings measured in the same run\n")
	p.table([]string{"file", "ceiling", "impl", "time", "achieved"}, rows)
}

// verdict is one checked target.
type verdict struct{ what, measured, result string }

func check(ratio, target float64) string {
	if ratio >= target {
		return "PASS"
	}
	return "FAIL"
}

func (p *printer) targets(m *Result) {
	p.line("## Targets\n")
	var rows [][]string
	add := func(target string, vs []verdict, missing string) {
		if len(vs) == 0 {
			rows = append(rows, []string{target, "—", "not measured: " + missing})
			return
		}
		pass := 0
		for _, v := range vs {
			if strings.HasPrefix(v.result, "PASS") {
				pass++
			}
		}
		rows = append(rows, []string{target, fmt.Sprintf("%d of %d pass", pass, len(vs)), summary(pass, len(vs))})
		for _, v := range vs {
			rows = append(rows, []string{"  " + v.what, v.measured, v.result})
		}
	}

	var mem []verdict
	if c := m.Ceilings.Copy; c != nil && c.GBs > 0 {
		for _, k := range m.Kernels {
			if k.Impl == Ours && k.Bound == Memory && k.Error == "" {
				r := k.GBs / c.GBs
				mem = append(mem, verdict{k.Name, fmt.Sprintf("%.0f GB/s = %.0f%% of copy", k.GBs, 100*r), check(r, TargetMemory)})
			}
		}
	}
	add(fmt.Sprintf("memory-bound kernels ≥ %.0f%% of the copy bandwidth", 100*TargetMemory), mem, "no copy ceiling or no memory-bound kernels")

	// ratioTo compares our kernels that keep selects with the first of
	// impls measured at the same name.
	ratioTo := func(impls []string, target float64, keep func(k Kernel) bool) []verdict {
		var vs []verdict
		for _, k := range m.Kernels {
			if k.Impl != Ours || k.Error != "" || !keep(k) {
				continue
			}
			for _, impl := range impls {
				o := m.Kernel(k.Name, impl)
				if o == nil || o.Error != "" {
					continue
				}
				r := o.Median / k.Median
				vs = append(vs, verdict{k.Name, fmt.Sprintf("%.2f× %s (%s vs %s)", r, impl, k.Achieved(), o.Achieved()), check(r, target)})
				break
			}
		}
		return vs
	}
	gemm := ratioTo([]string{CuBLASLt}, TargetGEMM, func(k Kernel) bool {
		return strings.HasPrefix(k.Name, "gemm/") && strings.Contains(k.Name, "/bf16/") && k.Bound == Compute
	})
	add(fmt.Sprintf("bf16 GEMM ≥ %.0f%% of cuBLASLt", 100*TargetGEMM), gemm, "no cuBLASLt GEMM beside ours")
	att := ratioTo([]string{TorchSDPA}, TargetAttention, func(k Kernel) bool { return strings.HasPrefix(k.Name, "attention/fwd/") })
	add(fmt.Sprintf("attention forward ≥ %.0f%% of PyTorch SDPA", 100*TargetAttention), att, "no PyTorch SDPA result")

	var step []verdict
	for _, s := range m.Steps {
		if s.Impl != Ours || s.Error != "" {
			continue
		}
		o := m.step(s.Name, TorchPEFT)
		if o == nil {
			continue
		}
		what := s.Name + gemmTag(s.GEMM)
		if o.Error != "" {
			step = append(step, verdict{what, fmt.Sprintf("%.0f tok/s; the peer failed: %s", s.TokensPerS, o.Error), "PASS (the peer failed)"})
			continue
		}
		r := s.TokensPerS / o.TokensPerS
		res := check(r, TargetStep)
		mem := "memory not compared"
		if s.PeakBytes > 0 && o.PeakBytes > 0 {
			mem = fmt.Sprintf("peak %s vs %s", FormatBytes(s.PeakBytes), FormatBytes(o.PeakBytes))
			if s.PeakBytes > o.PeakBytes {
				res = "FAIL (more memory)"
			}
		}
		step = append(step, verdict{what, fmt.Sprintf("%.2f× tokens/s (%.0f vs %.0f); %s", r, s.TokensPerS, o.TokensPerS, mem), res})
	}
	add("LoRA step ≥ PyTorch + PEFT's tokens/s at no more memory", step, "no PyTorch + PEFT step result")
	p.table([]string{"target", "measured", "verdict"}, rows)
}

// grouped orders xs by name, in the order names first appear, keeping each
// name's implementations together.
func grouped[T any](xs []T, name func(T) string) []T {
	var order []string
	by := map[string][]T{}
	for _, x := range xs {
		n := name(x)
		if _, ok := by[n]; !ok {
			order = append(order, n)
		}
		by[n] = append(by[n], x)
	}
	var out []T
	for _, n := range order {
		out = append(out, by[n]...)
	}
	return out
}

func summary(pass, n int) string {
	if pass == n {
		return "PASS"
	}
	return "FAIL"
}

func (m *Result) step(name, impl string) *Step {
	for i := range m.Steps {
		if m.Steps[i].Name == name && m.Steps[i].Impl == impl {
			return &m.Steps[i]
		}
	}
	return nil
}

// Achieved is the kernel's figure that matters: TFLOP/s (GFLOP/s below one
// TFLOP/s) for a compute-bound kernel, GB/s for a memory-bound one.
func (k *Kernel) Achieved() string {
	if k.Error != "" {
		return "error"
	}
	switch {
	case k.Bound == Compute && k.TFLOPs >= 1:
		return fmt.Sprintf("%.1f TFLOP/s", k.TFLOPs)
	case k.Bound == Compute:
		return fmt.Sprintf("%.1f GFLOP/s", 1e3*k.TFLOPs)
	case k.GBs >= 10:
		return fmt.Sprintf("%.0f GB/s", k.GBs)
	}
	return fmt.Sprintf("%.2f GB/s", k.GBs)
}

func (p *printer) kernels(m *Result) {
	if len(m.Kernels) == 0 {
		return
	}
	p.line("## Kernels\n")
	p.line("Time is the median per call; achieved is TFLOP/s for compute-bound kernels and GB/s (the least traffic the op must make) for memory-bound ones; %% of ceiling is over the GEMM or copy ceiling above; ratios are throughput, ours over the other.\n")
	var rows [][]string
	held := false
	for _, k := range grouped(m.Kernels, func(k Kernel) string { return k.Name }) {
		ours := m.Kernel(k.Name, Ours)
		ratio, pctc := "", ""
		if ours != nil && k.Impl != Ours && ours.Error == "" && k.Error == "" {
			ratio = fmt.Sprintf("%.2f×", k.Median/ours.Median)
		}
		if k.PctCeiling > 0 {
			pctc = fmt.Sprintf("%.0f%%", k.PctCeiling)
		}
		t := seconds(k.Median)
		if k.Held {
			t += " ‡"
			held = true
		}
		if k.Error != "" {
			t = "error: " + k.Error
		}
		rows = append(rows, []string{k.Name, k.Impl, t, k.Achieved(), pctc, ratio})
	}
	p.table([]string{"kernel", "impl", "time", "achieved", "% of ceiling", "ours / this"}, rows)
	if held {
		p.line("\n‡ The host queued these calls more slowly than the device ran them: their timed runs were queued behind a wait on the device, so that the calls ran back to back and the time is the device's alone.")
	}
}

func (p *printer) steps(m *Result) {
	if len(m.Steps) == 0 {
		return
	}
	p.line("## Training step\n")
	var rows [][]string
	var counts []string
	for _, s := range grouped(m.Steps, func(s Step) string { return s.Name }) {
		if s.FLOPCount != "" && !slices.Contains(counts, s.FLOPCount) {
			counts = append(counts, s.FLOPCount)
		}
		// Each of our rows (one per GEMM) against the PyTorch + PEFT step.
		ratio, memRatio := "", ""
		if o := m.step(s.Name, TorchPEFT); s.Impl == Ours && o != nil && o.Error == "" && s.Error == "" {
			ratio = fmt.Sprintf("%.2f×", s.TokensPerS/o.TokensPerS)
			if s.PeakBytes > 0 && o.PeakBytes > 0 {
				memRatio = fmt.Sprintf("%.2f×", float64(s.PeakBytes)/float64(o.PeakBytes))
			}
		}
		mfu := ""
		if s.MFU > 0 {
			mfu = fmt.Sprintf("%.1f%%", 100*s.MFU)
		}
		if s.Error != "" {
			rows = append(rows, []string{s.Name, s.Impl, s.GEMM, fmt.Sprint(s.Tokens), "error: " + s.Error, "", "", "", "", "", "", ""})
			continue
		}
		rows = append(rows, []string{s.Name, s.Impl, s.GEMM, fmt.Sprint(s.Tokens), seconds(s.Median), fmt.Sprintf("%.0f", s.TokensPerS),
			mfu, FormatBytes(s.PeakBytes), FormatBytes(s.DeviceUsedBytes), count(s.Launches), ratio, memRatio})
	}
	p.table([]string{"step", "impl", "GEMM", "tokens", "time", "tokens/s", "MFU", "peak memory", "device used", "launches",
		"tokens/s over " + TorchPEFT, "peak memory over " + TorchPEFT}, rows)
	for _, c := range counts {
		p.line("- FLOPs counted: %s", c)
	}
	var said []string
	for _, s := range m.Steps {
		for _, n := range []string{
			maybe(s.PeakWhat != "", "peak memory of "+s.Impl+": "+s.PeakWhat),
			maybe(s.MFUPeak != "", "MFU of "+s.Impl+" is over the "+s.MFUPeak),
		} {
			if n != "" && !slices.Contains(said, n) {
				said = append(said, n)
				p.line("- %s", n)
			}
		}
	}
	p.line("")
}

func (p *printer) generation(m *Result) {
	if len(m.Generation) == 0 {
		return
	}
	p.line("## Generation\n")
	var rows [][]string
	for _, g := range grouped(m.Generation, func(g Generation) string { return g.Name }) {
		// Each of our rows (one per GEMM) against Hugging Face's generation.
		var peer *Generation
		for i := range m.Generation {
			if m.Generation[i].Name == g.Name && m.Generation[i].Impl == TorchHF {
				peer = &m.Generation[i]
			}
		}
		ratio := ""
		if g.Impl == Ours && peer != nil && peer.Error == "" && g.Error == "" {
			ratio = fmt.Sprintf("%.2f×", g.TokensPerS/peer.TokensPerS)
		}
		if g.Error != "" {
			rows = append(rows, []string{g.Name, g.Impl, g.GEMM, g.Phase, fmt.Sprint(g.Batch), "error: " + g.Error, "", "", "", ""})
			continue
		}
		rows = append(rows, []string{g.Name, g.Impl, g.GEMM, g.Phase, fmt.Sprint(g.Batch), seconds(g.Median), fmt.Sprintf("%.0f", g.TokensPerS),
			count(g.Launches), count(g.Calls), ratio})
	}
	p.table([]string{"generation", "impl", "GEMM", "phase", "batch", "time", "tokens/s", "launches per step", "host calls per step",
		"tokens/s over " + TorchHF}, rows)
}

// profileTop is how many ops by extents a profile's second table lists.
const profileTop = 15

// profiles writes where the device time of each profiled step went: by op,
// then the ops by extents that took the most.
func (p *printer) profiles(m *Result) {
	type prof struct {
		name, what string
		p          *OpProfile
	}
	var all []prof
	for _, s := range m.Steps {
		if pr := s.Profile; pr != nil {
			all = append(all, prof{s.Name + gemmTag(s.GEMM), fmt.Sprintf("One more training step: %s on the host's clock, the device busy with an op for %s of it (%s).",
				seconds(pr.WallS), pct(pr.DeviceS/pr.WallS), seconds(pr.DeviceS)), pr})
		}
	}
	for _, g := range m.Generation {
		if pr := g.Profile; pr != nil {
			// On a GPU the holds make the profiled steps' wall time no
			// measure of the device's idle time; the timed steps' is.
			step := g.Median / float64(g.NewTokens)
			all = append(all, prof{g.Name + gemmTag(g.GEMM), fmt.Sprintf("%d more decoding steps (on a GPU their ops launched one by one rather than replayed as one graph, each step's held back until the host has queued them, so that they run back to back as a graph's do): the ops take %s per step, %s of a timed step's %s.",
				pr.Steps, seconds(pr.DeviceS), pct(pr.DeviceS/step), seconds(step)), pr})
		}
	}
	if len(all) == 0 {
		return
	}
	p.line("## Where the time goes\n")
	p.line("Each op of the profiled steps timed on its own (on a GPU between events on its stream, on the CPU on the host's clock); times and counts per step. Achieved: the op's arithmetic and least memory traffic over its time, where its extents alone set them (GEMMs).\n")
	for _, a := range all {
		pr := a.p
		p.line("### %s\n", a.name)
		p.line("%s\n", a.what)
		var kinds []OpTotal
		at := map[string]int{}
		for _, o := range pr.Ops {
			i, ok := at[o.Op]
			if !ok {
				i = len(kinds)
				at[o.Op] = i
				kinds = append(kinds, OpTotal{Op: o.Op})
			}
			kinds[i].Calls += o.Calls
			kinds[i].Launches += o.Launches
			kinds[i].Seconds += o.Seconds
		}
		sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].Seconds > kinds[j].Seconds })
		row := func(o OpTotal, cum float64, extents bool) []string {
			r := []string{o.Op}
			if extents {
				r = append(r, o.Extents)
			}
			r = append(r, fmt.Sprintf("%.4g", o.Calls), fmt.Sprintf("%.4g", o.Launches), seconds(o.Seconds), seconds(o.Seconds/o.Calls),
				pct(o.Seconds/pr.DeviceS))
			if extents {
				r = append(r, pct(cum/pr.DeviceS), maybe(o.FLOPs > 0 && o.Seconds > 0,
					flopRate(o.FLOPs/o.Seconds)+fmt.Sprintf(", %.0f GB/s", o.Bytes/o.Seconds/1e9)))
			}
			return r
		}
		var rows [][]string
		for _, k := range kinds {
			rows = append(rows, row(k, 0, false))
		}
		p.table([]string{"op", "calls", "launches", "time", "per call", "share"}, rows)
		if len(pr.Ops) > profileTop {
			p.line("The %d ops by extents that took the most (of %d):\n", profileTop, len(pr.Ops))
		}
		rows, cum := nil, 0.0
		for _, o := range pr.Ops[:min(profileTop, len(pr.Ops))] {
			cum += o.Seconds
			rows = append(rows, row(o, cum, true))
		}
		p.table([]string{"op", "extents", "calls", "launches", "time", "per call", "share", "cumulative", "achieved"}, rows)
	}
}

// flopRate formats FLOP/s in TFLOP/s, or GFLOP/s below one TFLOP/s.
func flopRate(f float64) string {
	if f < 1e12 {
		return fmt.Sprintf("%.1f GFLOP/s", f/1e9)
	}
	return fmt.Sprintf("%.1f TFLOP/s", f/1e12)
}

// count formats a count per step, "" when there is none.
func count(n float64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f", n)
}

// gemmTag is " (GEMM gemm)" for our entries that record their GEMM, else "".
func gemmTag(gemm string) string {
	if gemm == "" {
		return ""
	}
	return " (GEMM " + gemm + ")"
}

// maybe returns s when cond holds, else "".
func maybe(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// FormatBytes prints a memory size in MiB or GiB ("" for none).
func FormatBytes(b int64) string {
	switch {
	case b <= 0:
		return ""
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
