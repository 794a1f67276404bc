package sass

import (
	"reflect"
	"strings"
	"testing"
)

// A listing in cuobjdump's layout: a load read by the next instruction,
// one read three later, one read by no one.
const listing = `
	code for sm_90
		Function : _Z6kernelILi1EEvv
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDSM.16.M88.4 R156, [R197] ;                  /* 0x000000 */
                                                                                /* 0x000000 */
        /*0010*/                   HMMA.16816.F32.BF16 R152, R56, R156, RZ ;    /* 0x000000 */
        /*0020*/                   LDSM.16.MT88.4 R8, [R197+0x1000] ;           /* 0x000000 */
        /*0030*/                   IADD3 R20, R21, 0x1, RZ ;                    /* 0x000000 */
        /*0040*/              @!P1 STS [R22], R23 ;                              /* 0x000000 */
        /*0050*/                   HMMA.16816.F32.BF16 R24, R120, R10, R24 ;    /* 0x000000 */
        /*0060*/                   LDSM.16.M88.2 R40, [R197+0x2000] ;           /* 0x000000 */
        /*0070*/                   EXIT ;                                        /* 0x000000 */
		..........
		Function : _Z6kernelILi2EEvv
        /*0000*/                   EXIT ;                                        /* 0x000000 */
`

func TestParseAndLoadUse(t *testing.T) {
	fns, err := Parse(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 2 || fns[0].Name != "_Z6kernelILi1EEvv" || len(fns[0].Code) != 8 || len(fns[1].Code) != 1 {
		t.Fatalf("Parse: %d functions %+v", len(fns), fns)
	}
	if got := Find(fns, "_Z6kernelILi2"); len(got) != 1 || got[0].Name != "_Z6kernelILi2EEvv" {
		t.Errorf("Find: %+v", got)
	}
	if got, want := LoadUse(fns[0], "LDSM"), []int{1, 3, 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("LoadUse = %v, want %v", got, want)
	}
	for _, c := range []struct {
		in            Instr
		writes, reads []int
	}{
		{fns[0].Code[0], []int{156, 157, 158, 159}, []int{197}},
		{fns[0].Code[1], []int{152, 153, 154, 155}, []int{56, 57, 58, 59, 156, 157}},
		{fns[0].Code[4], nil, []int{22, 23}},
		{fns[0].Code[6], []int{40, 41}, []int{197}},
		{Instr{Op: "LDGSTS.E.BYPASS.128", Args: "[R21], [R120.64+0x80]"}, nil, []int{21, 120, 121}},
	} {
		if w, r := c.in.Writes(), c.in.Reads(); !reflect.DeepEqual(w, c.writes) || !reflect.DeepEqual(r, c.reads) {
			t.Errorf("%s %s: writes %v reads %v, want %v %v", c.in.Op, c.in.Args, w, r, c.writes, c.reads)
		}
	}
	if _, err := Parse(strings.NewReader("no code here\n")); err == nil {
		t.Error("Parse of text without a function: no error")
	}
}

func TestLoops(t *testing.T) {
	const code = `
		Function : _Z4loopv
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0020*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0030*/              @P0 BRA 0x10 ;
        /*0040*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
        /*0050*/              @P1 BRA 0x0 ;
        /*0060*/                   BRA 0x70 ;
        /*0070*/                   EXIT ;
`
	fns, err := Parse(strings.NewReader(code))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fns[0].Code[3].Addr, 0x30; got != want {
		t.Errorf("address %#x, want %#x", got, want)
	}
	if got, want := Loops(fns[0]), [][2]int{{1, 3}, {0, 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Loops = %v, want %v (the forward branch is no loop)", got, want)
	}
}

func TestPackLoop(t *testing.T) {
	const code = `
		Function : _Z4packv
        /*0000*/                   LDG.E.128 R4, [R2.64] ;
        /*0010*/                   FADD R8, R4, R8 ;
        /*0020*/              @P0 BRA 0x0 ;
        /*0030*/                   LDG.E.U16 R4, [R2.64] ;
        /*0040*/              @P1 BRA 0x30 ;
        /*0050*/              @P2 BRA 0x0 ;
        /*0060*/                   EXIT ;
        /*0070*/                   BRA 0x70;
`
	fns, err := Parse(strings.NewReader(code))
	if err != nil {
		t.Fatal(err)
	}
	// Loops: [0, 2] with the 16-byte load, [3, 4] without, [0, 5] around
	// both, and the branch to itself after EXIT, which Summarize leaves out.
	if got := PackLoop(fns[0]); got != 3 {
		t.Errorf("PackLoop = %d, want 3 (the inner loop with the 16-byte load)", got)
	}
	want := Summary{Name: "_Z4packv", Instrs: 8, PackLoop: 3, Longest: 6, LoadBatch: 1, WideLoads: 1}
	if got := Summarize(fns[0]); got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	fns[0].Code[0].Op = "LDG.E.64"
	if got := PackLoop(fns[0]); got != 0 {
		t.Errorf("PackLoop without a 16-byte load = %d, want 0", got)
	}
}

func TestWideAccesses(t *testing.T) {
	f := Function{Code: []Instr{
		{Op: "LDG.E.128.CONSTANT", Args: "R4, desc[UR4][R2.64]"},
		{Op: "LDG.E.128", Args: "R8, desc[UR4][R2.64+0x10]"},
		{Op: "LDG.E.U16", Args: "R12, desc[UR4][R2.64]"},
		{Op: "LDGSTS.E.BYPASS.128", Args: "[R21], [R120.64+0x80]"}, // cp.async: not a load into registers
		{Op: "STG.E.128", Args: "desc[UR4][R6.64], R4"},
		{Op: "STG.E", Args: "desc[UR4][R6.64], R4"},
		{Op: "STS.128", Args: "[R3], R4"}, // shared memory
	}}
	if l, s := WideAccesses(f); l != 2 || s != 1 {
		t.Errorf("WideAccesses = %d loads, %d stores; want 2, 1", l, s)
	}
}

func TestParsePtxas(t *testing.T) {
	report := `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1aPf' for 'sm_80'
ptxas info    : Function properties for _Z1aPf
    32 bytes stack frame, 52 bytes spill stores, 64 bytes spill loads
ptxas info    : Used 255 registers, 480 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1aPf' for 'sm_90'
ptxas info    : Function properties for _Z1aPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 236 registers
`
	got, err := ParsePtxas(strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	want := []Spill{{"_Z1aPf", "sm_80", 52, 64, 255}, {"_Z1aPf", "sm_90", 0, 0, 236}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePtxas = %+v, want %+v", got, want)
	}
	if _, err := ParsePtxas(strings.NewReader("nothing\n")); err == nil {
		t.Error("ParsePtxas of a report without an entry: no error")
	}
}

func TestLoadBatch(t *testing.T) {
	f := Function{Code: []Instr{
		{Op: "LDG.E.128.CONSTANT", Args: "R4, desc[UR4][R2.64]"},
		{Op: "LDG.E.128", Args: "R8, desc[UR4][R2.64+0x10]"},
		{Op: "IADD3", Args: "R2, R2, 0x20, RZ"},
		{Op: "LDG.E.64", Args: "R12, desc[UR4][R2.64]"},
		{Op: "FADD", Args: "R20, R7, R20"}, // reads the first load's last register: a batch of 3
		{Op: "LDG.E", Args: "R14, desc[UR4][R2.64+0x8]"},
		{Op: "FADD", Args: "R21, R14, R21"}, // a batch of 1
		{Op: "LDG.E.128", Args: "R4, desc[UR4][R2.64+0x40]"},
		{Op: "STG.E.128", Args: "desc[UR4][R6.64], R4"}, // a store reads its value
	}}
	if got := LoadBatch(f, "LDG."); got != 3 {
		t.Errorf("LoadBatch = %d, want 3", got)
	}
	f.Code[4].Args = "R20, R13, R20" // the 8-byte load's second register
	if got := LoadBatch(f, "LDG."); got != 3 {
		t.Errorf("LoadBatch reading the second register of an 8-byte load = %d, want 3", got)
	}
	f.Code[4].Args = "R20, R15, R20" // no load's register: the first four are one batch
	if got := LoadBatch(f, "LDG."); got != 4 {
		t.Errorf("LoadBatch = %d, want 4 (R15 is no load's)", got)
	}
}
