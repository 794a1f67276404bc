package sass

import (
	"bytes"
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

// Our bf16 GEMM's 128×128 tile (kernels/gemm.cu) with A as stored and B
// transposed (the model's x·Wᵀ), bf16 out: 4 warps of 64×64.
const gemm128 = "_Z16gemm_bf16_kernelI8TcConfigILi128ELi128ELi2ELi2ELi2EELb0ELb1E13__nv_bfloat16E"

// TestKernelCode holds the real kernel library to what no result on a GPU
// shows by itself: no kernel spills registers but those knownSpills lists
// (and none more than it allows), the default attention kernels spill
// nothing, and in their sm_90 code (an H100's or H200's) the forward's
// fragment loads are read no sooner than 4 instructions after they are
// issued, the backward's no sooner than the second, and our GEMM's (its
// 128×128 tile) no sooner than the fourth. It reads TW_KERNEL_LIB (the path
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
	fns = disassemble(t, lib, "attention.cu.o", "sm_90")
	if d := check(fwdDefault); soon(d, 4) > 0 {
		t.Errorf("forward's default: %d of its %d ldmatrix are read within 3 instructions (want none: FwdMath::scores' ring)", soon(d, 4), len(d))
	}
	// The check can fail: the same tile loading each K fragment just
	// before its products has the loads read at once.
	if d := check(fwdRingOne); soon(d, 2) < 32 {
		t.Errorf("forward with a ring of 1: %d of its %d ldmatrix read by the next instruction; the schedule this test guards against is not what it was (want 32 or more)", soon(d, 2), len(d))
	}

	fns = disassemble(t, lib, "attention_backward.cu.o", "sm_90")
	if d := check(bwdDefault); soon(d, 2) > 0 {
		t.Errorf("backward's default: %d of its %d ldmatrix are read by the next instruction (want none: the dQ product's ring)", soon(d, 2), len(d))
	}
	if d := check(bwdDQ64); soon(d, 2) < 8 {
		t.Errorf("backward with dQ units of 64: %d of its %d ldmatrix read by the next instruction; the schedule this test guards against is not what it was (want 8 or more)", soon(d, 2), len(d))
	}

	// The GEMM loads a k-tile's fragments (16 ldmatrix.x4 a warp) before
	// its 64 mma: none is read within 3 instructions.
	fns = disassemble(t, lib, "gemm.cu.o", "sm_90")
	if d := check(gemm128); len(d) != 16 || soon(d, 4) > 0 {
		t.Errorf("GEMM, 128×128 tile: %d ldmatrix (want 16: a 64×64 warp tile, two k-steps), %d of them read within 3 instructions (want none)", len(d), soon(d, 4))
	}
}

// disassemble returns the sm machine code of member obj of the archive lib.
func disassemble(t *testing.T, lib, obj, arch string) []Function {
	t.Helper()
	for _, tool := range []string{"ar", "cuobjdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (TW_KERNEL_LIB is set: the toolkit and binutils are expected)", tool)
		}
	}
	dir := t.TempDir()
	o := filepath.Join(dir, obj)
	member, err := exec.Command("ar", "p", lib, obj).Output()
	if err != nil {
		t.Fatalf("ar p %s %s: %v", lib, obj, err)
	}
	if err := os.WriteFile(o, member, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("cuobjdump", "-sass", "-arch", arch, o).Output()
	if err != nil {
		t.Fatalf("cuobjdump -sass -arch %s %s: %v", arch, obj, err)
	}
	fns, err := Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	return fns
}
