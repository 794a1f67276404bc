package sass

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kernels whose spills are known, each with the most bytes (stores and
// loads together) it may spill: sweep variants that are not a default, the
// f32 plain paths, and one sampling kernel. Every other kernel of the
// library must not spill at all, the defaults (TestKernelCode) among them.
var knownSpills = []struct {
	prefix, arch string
	max          int
}{
	{"_Z15attn_fwd_kernelI13__nv_bfloat16Li128ELi64ELi2E", "", 128},                      // 32 rows per warp at 64 keys (kernels/attention.cu)
	{"_Z15attn_fwd_kernelIfLi64E", "", 52},                                               // f32, head width 64
	{"_Z15attn_bwd_kernelIfLi128E", "", 144},                                             // f32, head width 128
	{"_Z15attn_bwd_kernelI13__nv_bfloat16Li128ELi128ELi128ELi2E", "sm_80", 52},           // needs an H100's shared memory
	{"_Z15attn_bwd_kernelI13__nv_bfloat16Li128ELi128ELi128ELi1ELi16ELi64E", "sm_80", 16}, // dQ units of 64, an H100's tile
	{"_Z11draw_kernelILb1E", "sm_90", 8},
}

// The default attention kernels (kernels/attention.cu's fwd_plan,
// attention_backward.cu's default_bf16) at Llama's head width, bf16.
const (
	fwdDefault  = "_Z15attn_fwd_kernelI13__nv_bfloat16Li128ELi128ELi1ELi1ELi8E"         // 128 keys, 16 rows per warp, ring of 8
	fwdRingOne  = "_Z15attn_fwd_kernelI13__nv_bfloat16Li128ELi128ELi1ELi1ELi1E"         // the same with a ring of 1
	decDefault  = "_Z15attn_fwd_kernelI13__nv_bfloat16Li128ELi64ELi1ELi1ELi8E"          // decoding's 64 keys
	bwdDefault  = "_Z15attn_bwd_kernelI13__nv_bfloat16Li128ELi128ELi128ELi1ELi16ELi32E" // dQ units of 32 columns
	bwdDQ64     = "_Z15attn_bwd_kernelI13__nv_bfloat16Li128ELi128ELi128ELi1ELi16ELi64E" // the same with units of 64
	bwdDefault8 = "_Z15attn_bwd_kernelI13__nv_bfloat16Li128ELi64ELi128ELi2ELi16ELi32E"  // an A100's
)

// The bf16 instantiations of the memory-bound kernels that move 16-byte
// packs (8 elements; the sampling weights' stores 4 floats), each with the
// object it is in and which of its accesses are packed: every one must keep
// at least one 16-byte global load and store where it reads and writes so.
// (The flat ops' prefixes name the pack and the unroll: flat_kernel<8, U,
// Op>; a prefix may match several modes of one op, each checked.)
var widePacks = []struct {
	obj, prefix string
	load, store bool
}{
	{"elementwise.cu.o", "_Z11flat_kernelILi8ELi4E6FillOpI13__nv_bfloat16EE", false, true},
	{"elementwise.cu.o", "_Z11flat_kernelILi8ELi4E5AddOpI13__nv_bfloat16EE", true, true},
	{"elementwise.cu.o", "_Z11flat_kernelILi4ELi4E6CastOpIf13__nv_bfloat16EE", false, true}, // to f32: 4 bf16 (8 bytes) in, 4 floats out
	{"elementwise.cu.o", "_Z11flat_kernelILi4ELi4E6CastOpI13__nv_bfloat16fEE", true, false}, // from f32: 4 floats in, 4 bf16 out
	{"gelu.cu.o", "_Z11flat_kernelILi8ELi4E6GELUOpI13__nv_bfloat16Li", true, true},
	{"gelu.cu.o", "_Z11flat_kernelILi8ELi4E14GELUBackwardOpI13__nv_bfloat16Li", true, true},
	{"swiglu.cu.o", "_Z11flat_kernelILi8ELi2E8SwiGLUOpI13__nv_bfloat16EE", true, true},
	{"swiglu.cu.o", "_Z11flat_kernelILi8ELi2E16SwiGLUBackwardOpI13__nv_bfloat16EE", true, true},
	{"dropout.cu.o", "_Z11flat_kernelILi8ELi2E9DropoutOpI13__nv_bfloat16EE", true, true},
	{"embedding.cu.o", "_Z16embedding_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"embedding.cu.o", "_Z29embedding_backward_sum_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"rmsnorm.cu.o", "_Z14rmsnorm_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"rmsnorm.cu.o", "_Z18add_rmsnorm_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"rmsnorm.cu.o", "_Z23rmsnorm_backward_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"rmsnorm.cu.o", "_Z13colsum_kernelI13__nv_bfloat16Li4E", true, false}, // f32 partials in, 4 bf16 out
	{"layernorm.cu.o", "_Z16layernorm_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"layernorm.cu.o", "_Z25layernorm_backward_kernelI13__nv_bfloat16S0_Li8E", true, true},
	{"bias.cu.o", "_Z15add_bias_kernelI13__nv_bfloat16Li8E", true, true},
	{"bias.cu.o", "_Z19bias_partial_kernelI13__nv_bfloat16Li8E", true, true},
	{"rope.cu.o", "_Z11rope_kernelI13__nv_bfloat16Li8E", true, true},
	{"logsoftmax.cu.o", "_Z24logsoftmax_gather_kernelI13__nv_bfloat16Li8E", true, false},
	{"logsoftmax.cu.o", "_Z33logsoftmax_gather_backward_kernelI13__nv_bfloat16Li8E", true, true},
	{"sumsquares.cu.o", "_Z24sum_squares_parts_kernelI13__nv_bfloat16E", true, false},
	{"adamw.cu.o", "_Z12adamw_kernelI13__nv_bfloat16S0_Lb1E", true, true},
	{"adamw.cu.o", "_Z18adamw_multi_kernelI13__nv_bfloat16E", true, true},
	{"sample.cu.o", "_Z16max_chunk_kernelI13__nv_bfloat16Li8E", true, false},
	{"sample.cu.o", "_Z19argmax_chunk_kernelI13__nv_bfloat16Li8E", true, false},
	{"sample.cu.o", "_Z14weights_kernelI13__nv_bfloat16Li4E", false, true}, // 4 bf16 (8 bytes) in, 4 floats out
	{"gemm.cu.o", "_Z18gemm_skinny_kernelI", true, false},                  // decoding's projections: the weights read once, in packs
}

// Memory-bound bf16 kernels and the most 16-byte-pack loads each must
// issue before it reads any of them (LoadBatch over its sm_90 code): the
// loads a thread has in flight. RMSNorm's forward kernels, which load
// Llama's 4096-wide row in four packs a thread, had one: each pack was
// widened to f32 as it came in, and nvcc issued the next load after that
// (rmsnorm.cu, "all loads first"). The others are held to what they do now.
var loadBatches = []struct {
	obj, prefix string
	least       int
}{
	{"rmsnorm.cu.o", "_Z14rmsnorm_kernelI13__nv_bfloat16S0_Li8ELi4E", 4},     // x's 4 packs (w's after the sum)
	{"rmsnorm.cu.o", "_Z18add_rmsnorm_kernelI13__nv_bfloat16S0_Li8ELi4E", 8}, // x's and delta's (and w's: 12)
	{"rmsnorm.cu.o", "_Z23rmsnorm_backward_kernelI13__nv_bfloat16S0_Li8ELi1E", 8},
	{"embedding.cu.o", "_Z29embedding_backward_sum_kernelI13__nv_bfloat16S0_Li8E", 8}, // 4 tokens × 2 packs of dout
	{"elementwise.cu.o", "_Z11flat_kernelILi4ELi4E6CastOpI13__nv_bfloat16fEE", 4},
	{"elementwise.cu.o", "_Z11flat_kernelILi8ELi4E5AddOpI13__nv_bfloat16EE", 6}, // of 8: ptxas adds the first packs before the last loads
	{"dropout.cu.o", "_Z11flat_kernelILi8ELi2E9DropoutOpI13__nv_bfloat16EE", 2},
	{"swiglu.cu.o", "_Z11flat_kernelILi8ELi2E8SwiGLUOpI13__nv_bfloat16EE", 4},
	{"swiglu.cu.o", "_Z11flat_kernelILi8ELi2E16SwiGLUBackwardOpI13__nv_bfloat16EE", 6},
	{"bias.cu.o", "_Z19bias_partial_kernelI13__nv_bfloat16Li8E", 4},                   // a lane's next 4 rows while it adds these (was 2)
	{"layernorm.cu.o", "_Z16layernorm_kernelI13__nv_bfloat16S0_Li8ELi4E", 10},         // x's, w's and b's 4 packs: 10 of 12 (was 4)
	{"gelu.cu.o", "_Z11flat_kernelILi8ELi4E6GELUOpI13__nv_bfloat16Li2EE", 3},          // quick: 3 of 4 packs (1 of 2 at 2 a thread)
	{"gelu.cu.o", "_Z11flat_kernelILi8ELi4E14GELUBackwardOpI13__nv_bfloat16Li2EE", 6}, // quick: 6 of 8 (3 of 4)
}

// Memory-bound bf16 kernels bound by instruction issue rather than by
// their bytes, and the most instructions their packs' loop may take (the
// shortest loop that holds a 16-byte global load). The loss head reads 2
// bytes an element (4 backward, with the store) and must issue about 9
// elements per SM and cycle to keep up with an H200's copy bandwidth: its
// forward measured 53% of it at ~500 instructions per 32 elements
// (2026-11-27). The limits are what the loops take now with a little room:
// 242 and 367 for the loss head, where the backward's took 631 with exp2f
// and a 64-bit test of each element's index against the target; 110 per 32
// elements for the sum of squares, where each element's 64-bit test
// against the part's end had made it 537.
var loopCeilings = []struct {
	obj, prefix string
	most        int
}{
	{"logsoftmax.cu.o", "_Z24logsoftmax_gather_kernelI13__nv_bfloat16Li8E", 270},
	{"logsoftmax.cu.o", "_Z33logsoftmax_gather_backward_kernelI13__nv_bfloat16Li8E", 400},
	{"sumsquares.cu.o", "_Z24sum_squares_parts_kernelI13__nv_bfloat16E", 130},
}

// Our bf16 GEMM's block tiles of 64 × 64 warp tiles (kernels/gemm.cu), with
// A as stored and B transposed (the model's x·Wᵀ), bf16 out, and the
// fragment loads a warp issues per k-tile: 128 × 128 (the default), 128 ×
// 128 in k-tiles 64 deep, 128 × 256.
const gemm128 = "_Z16gemm_bf16_kernelI8TcConfigILi128ELi128ELi32ELi2ELi2ELi4ELi2EELb0ELb1E13__nv_bfloat16E"

var gemmTiles = []struct {
	prefix string
	loads  int
}{
	{gemm128, 16},
	{"_Z16gemm_bf16_kernelI8TcConfigILi128ELi128ELi64ELi2ELi2ELi3ELi2EELb0ELb1E13__nv_bfloat16E", 32},
	{"_Z16gemm_bf16_kernelI8TcConfigILi128ELi256ELi32ELi2ELi4ELi4ELi1EELb0ELb1E13__nv_bfloat16E", 16},
}

// TestKernelCode holds the real kernel library to what no result on a GPU
// shows by itself: no kernel spills registers but those knownSpills lists
// (and none more than it allows), the default attention kernels spill
// nothing, and in their sm_90 code (an H100's or H200's) the forward's
// fragment loads are read no sooner than 4 instructions after they are
// issued, the backward's no sooner than the second, and our GEMM's (its
// 128-row tiles) no sooner than the fourth; and the memory-bound kernels'
// 16-byte packs (widePacks) are 16-byte loads and stores in that code,
// issued together (loadBatches); the issue-bound kernels' loops are no
// longer than loopCeilings allows; and no innermost loop around the tensor-core products of the default
// attention kernels or the GEMM divides integers. It reads TW_KERNEL_LIB (the path
// of libtwkernels_cuda.a, with ptxas.log beside it: `make test-cuda-build`
// sets it after building) and needs the toolkit's cuobjdump and binutils'
// ar.
func TestKernelCode(t *testing.T) {
	lib := os.Getenv("TW_KERNEL_LIB")
	if lib == "" {
		t.Skip("TW_KERNEL_LIB is not set: make test-cuda-build runs this against the library it builds with nvcc")
	}
	f, err := os.Open(filepath.Join(filepath.Dir(lib), "ptxas.log"))
	if err != nil {
		t.Fatal(err)
	}
	report, err := ParsePtxas(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ prefix, arch string }{
		{fwdDefault, "sm_80"}, {fwdDefault, "sm_90"}, {decDefault, "sm_80"}, {decDefault, "sm_90"},
		{bwdDefault, "sm_90"}, {bwdDefault8, "sm_80"}, {gemm128, "sm_80"}, {gemm128, "sm_90"},
	} {
		found := false
		for _, s := range report {
			found = found || s.Arch == want.arch && strings.HasPrefix(s.Name, want.prefix)
		}
		if !found {
			t.Errorf("no %s kernel named %s… in the ptxas report (renamed? update this test)", want.arch, want.prefix)
		}
	}
	for _, s := range report {
		spilled := s.Stores + s.Loads
		if spilled == 0 {
			continue
		}
		allowed := -1
		for _, k := range knownSpills {
			if strings.HasPrefix(s.Name, k.prefix) && (k.arch == "" || k.arch == s.Arch) {
				allowed = k.max
				break
			}
		}
		if spilled > allowed {
			t.Errorf("%s, %s: spills %d bytes stored and %d loaded (allowed: %d in all)", s.Name, s.Arch, s.Stores, s.Loads, max(allowed, 0))
		}
	}

	var fns []Function
	check := func(prefix string) []int {
		got := Find(fns, prefix)
		if len(got) != 1 {
			t.Fatalf("%d functions named %s… in the sm_90 code, want 1", len(got), prefix)
		}
		d := LoadUse(got[0], "LDSM")
		if len(d) == 0 {
			t.Fatalf("%s: no ldmatrix in its sm_90 code", prefix)
		}
		return d
	}
	soon := func(d []int, under int) (n int) {
		for _, x := range d {
			if x > 0 && x < under {
				n++
			}
		}
		return n
	}
	// The innermost loop around each tensor-core product holds no integer
	// division (a subroutine call, or the reciprocal sequence nvcc inlines
	// for 32 bits, whose I2F rounds up: I2F.RP, I2F.U32.RP): the
	// attention's row indices are FastDiv's multiplies
	// (kernels/attention.cuh). The loops around those (a block's items, a
	// backward's query tiles) may divide once per pass. Tried by mutation:
	// one FastDiv in the backward's slice loop written as a division fails
	// it.
	noDivision := func(f Function) {
		loops := Loops(f)
		hot := map[[2]int]bool{}
		for i, in := range f.Code {
			if !strings.HasPrefix(in.Op, "HMMA") {
				continue
			}
			inner := [2]int{-1, len(f.Code)}
			for _, l := range loops {
				if l[0] <= i && i <= l[1] && l[1]-l[0] < inner[1]-inner[0] {
					inner = l
				}
			}
			if inner[0] >= 0 {
				hot[inner] = true
			}
		}
		if len(hot) == 0 {
			t.Errorf("%s: no loop around its mma (does Loops read its branches?)", f.Name)
		}
		for l := range hot {
			body := f.Code[l[0] : l[1]+1]
			for _, in := range body {
				if strings.HasPrefix(in.Op, "CALL") || strings.HasPrefix(in.Op, "I2F") && strings.Contains(in.Op, ".RP") {
					t.Errorf("%s: %s at %#x, in the loop at %#x–%#x that holds its mma: an integer division (or another subroutine) per iteration",
						f.Name, in.Op, in.Addr, body[0].Addr, body[len(body)-1].Addr)
				}
			}
		}
	}
	fns = disassemble(t, lib, "attention.cu.o", "sm_90", fwdDefault, fwdRingOne, decDefault)
	for _, p := range []string{fwdDefault, decDefault} {
		for _, f := range Find(fns, p) {
			noDivision(f)
		}
	}
	if d := check(fwdDefault); soon(d, 4) > 0 {
		t.Errorf("forward's default: %d of its %d ldmatrix are read within 3 instructions (want none: FwdMath::scores' ring)", soon(d, 4), len(d))
	}
	// The check can fail: the same tile loading each K fragment just
	// before its products has the loads read at once.
	if d := check(fwdRingOne); soon(d, 2) < 32 {
		t.Errorf("forward with a ring of 1: %d of its %d ldmatrix read by the next instruction; the schedule this test guards against is not what it was (want 32 or more)", soon(d, 2), len(d))
	}

	fns = disassemble(t, lib, "attention_backward.cu.o", "sm_90", bwdDefault, bwdDQ64)
	for _, f := range Find(fns, bwdDefault) {
		noDivision(f)
	}
	if d := check(bwdDefault); soon(d, 2) > 0 {
		t.Errorf("backward's default: %d of its %d ldmatrix are read by the next instruction (want none: the dQ product's ring)", soon(d, 2), len(d))
	}
	if d := check(bwdDQ64); soon(d, 2) < 8 {
		t.Errorf("backward with dQ units of 64: %d of its %d ldmatrix read by the next instruction; the schedule this test guards against is not what it was (want 8 or more)", soon(d, 2), len(d))
	}

	// The memory-bound kernels' packs are 16-byte accesses in the code.
	const fill1 = "_Z11flat_kernelILi1ELi1E6FillOpI13__nv_bfloat16EE" // a fill one element at a time
	wanted := map[string][]string{"elementwise.cu.o": {fill1}}
	for _, w := range widePacks {
		wanted[w.obj] = append(wanted[w.obj], w.prefix)
	}
	byObj := map[string][]Function{}
	for obj, prefixes := range wanted {
		byObj[obj] = disassemble(t, lib, obj, "sm_90", prefixes...)
	}
	for _, w := range widePacks {
		got := Find(byObj[w.obj], w.prefix)
		if len(got) == 0 {
			t.Errorf("%s: no function named %s… in its sm_90 code (renamed? update widePacks)", w.obj, w.prefix)
		}
		for _, f := range got {
			l, s := WideAccesses(f)
			if w.load && l == 0 || w.store && s == 0 {
				t.Errorf("%s: %d 16-byte global loads and %d stores in its sm_90 code (want loads: %v, stores: %v): its packs were split into narrower accesses",
					f.Name, l, s, w.load, w.store)
			}
		}
	}
	// Loads in flight: the kernels of loadBatches issue their packs' loads
	// together.
	for _, b := range loadBatches {
		fns := Find(disassemble(t, lib, b.obj, "sm_90", b.prefix), b.prefix)
		if len(fns) != 1 {
			t.Errorf("%s: %d functions named %s… in its sm_90 code, want 1 (renamed? update loadBatches)", b.obj, len(fns), b.prefix)
			continue
		}
		if n := LoadBatch(fns[0], "LDG."); n < b.least {
			t.Errorf("%s: issues at most %d global loads before it reads one, want %d or more (its loads wait for each other)", fns[0].Name, n, b.least)
		}
	}
	// Issue: the issue-bound kernels' loops over their packs stay short.
	for _, c := range loopCeilings {
		fns := Find(disassemble(t, lib, c.obj, "sm_90", c.prefix), c.prefix)
		if len(fns) != 1 {
			t.Errorf("%s: %d functions named %s… in its sm_90 code, want 1 (renamed? update loopCeilings)", c.obj, len(fns), c.prefix)
			continue
		}
		if n := PackLoop(fns[0]); n == 0 || n > c.most {
			t.Errorf("%s: its shortest loop holding a 16-byte load takes %d instructions, want 1 to %d (more is slower where issue binds it)", fns[0].Name, n, c.most)
		}
	}
	// The check can fail: fill one element at a time stores no 16 bytes.
	if f := Find(byObj["elementwise.cu.o"], fill1); len(f) != 1 {
		t.Errorf("%d element-wise fill kernels in the sm_90 code, want 1", len(f))
	} else if _, s := WideAccesses(f[0]); s != 0 {
		t.Errorf("the element-wise fill has %d 16-byte stores: WideAccesses counts what it should not", s)
	}

	// The GEMM loads each k-step's fragments (8 ldmatrix.x4 a warp) one
	// k-step ahead of its products: none is read within 3 instructions.
	var prefixes []string
	for _, g := range gemmTiles {
		prefixes = append(prefixes, g.prefix)
	}
	fns = disassemble(t, lib, "gemm.cu.o", "sm_90", prefixes...)
	for _, g := range gemmTiles {
		for _, f := range Find(fns, g.prefix) {
			noDivision(f)
		}
		if d := check(g.prefix); len(d) != g.loads || soon(d, 4) > 0 {
			t.Errorf("GEMM %s: %d ldmatrix (want %d: 64×64 warp tiles, 8 per k-step), %d of them read within 3 instructions (want none)",
				g.prefix, len(d), g.loads, soon(d, 4))
		}
	}
}

// disassemble returns the sm machine code of the kernels of member obj of
// the archive lib whose names begin with one of prefixes (Disassemble),
// failing the test when there is none.
func disassemble(t *testing.T, lib, obj, arch string, prefixes ...string) []Function {
	t.Helper()
	for _, tool := range []string{"ar", "nm", "cuobjdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (TW_KERNEL_LIB is set: the toolkit and binutils are expected)", tool)
		}
	}
	fns, err := Disassemble(lib, obj, arch, prefixes...)
	if err != nil {
		t.Fatalf("%v (renamed? update this test)", err)
	}
	return fns
}

// TestReport reads the real library's loss-head backward kernels through
// Report: one line each of its six instantiations, the bf16 pack kernel's
// with the loop TestKernelCode reads.
func TestReport(t *testing.T) {
	lib := os.Getenv("TW_KERNEL_LIB")
	if lib == "" {
		t.Skip("TW_KERNEL_LIB is not set: make test-cuda-build runs this against the library it builds with nvcc")
	}
	var out strings.Builder
	if err := Report(&out, lib, "sm_90", "LOGSOFTMAX_GATHER_BACKWARD"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], "pack loop") {
		t.Fatalf("Report wrote %d lines, want a header and 6 kernels:\n%s", len(lines), out.String())
	}
	const bf16 = "_Z33logsoftmax_gather_backward_kernelI13__nv_bfloat16Li8E"
	want := fmt.Sprint(PackLoop(disassemble(t, lib, "logsoftmax.cu.o", "sm_90", bf16)[0]))
	found := false
	for _, l := range lines[1:] {
		if f := strings.Fields(l); strings.Contains(l, "logsoftmax_gather_backward_kernel<__nv_bfloat16, 8>") {
			found = true
			if f[1] != want {
				t.Errorf("the bf16 pack kernel's pack loop is %s in the report, %s by PackLoop:\n%s", f[1], want, l)
			}
		}
	}
	if !found {
		t.Errorf("no line of the bf16 pack kernel (is c++filt missing?):\n%s", out.String())
	}
}
