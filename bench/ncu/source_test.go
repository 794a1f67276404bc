package ncu

import (
	"strings"
	"testing"
)

// sourcePage is a source page as ncu prints it with --print-source sass: a
// line naming the kernel, the header (per-reason columns among the
// others), one row per instruction (a predicated one; a sample count with a
// thousands separator; an empty cell).
const sourcePage = `"Kernel Name","void attn_bwd_kernel<__nv_bfloat16, 128, 128, 128, 1>(BwdArgs<__nv_bfloat16>)"
"Address","Source","Live Registers","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","stall_barrier","stall_short_scoreboard","stall_math_pipe_throttle","stall_wait"
"00007f0000000000","LDSM.16.M88.4 R8, [R2] ;","40","30","20","5000","0","0","0","30"
"00007f0000000010","HMMA.16816.F32.BF16 R12, R8, R16, R12 ;","60","1,200","900","20000","0","900","300",""
"00007f0000000020","@!P0 HMMA.16816.F32.BF16 R20, R8, R18, R20 ;","60","600","500","20000","0","400","200","0"
"00007f0000000030","BAR.SYNC.DEFER_BLOCKING 0x0 ;","10","170","170","100","170","0","0","0"
"00007f0000000040","EXIT ;","2","0","0","8","0","0","0","0"
`

func TestReadSource(t *testing.T) {
	s, err := ReadSource(strings.NewReader(sourcePage), "attn-bwd")
	if err != nil {
		t.Fatal(err)
	}
	if s.Case != "attn-bwd" || s.Kernel != "attn_bwd_kernel<__nv_bfloat16, 128, 128, 128, 1>" || len(s.Insts) != 5 {
		t.Fatalf("case %q kernel %q, %d instructions", s.Case, s.Kernel, len(s.Insts))
	}
	if got := strings.Join(s.Reasons, ","); got != "stall_barrier,stall_short_scoreboard,stall_math_pipe_throttle,stall_wait" {
		t.Errorf("reasons %s", got)
	}
	h := s.Insts[1]
	if h.Samples != 1200 || h.Executed != 20000 || h.Stalls["stall_short_scoreboard"] != 900 || len(h.Stalls) != 2 || h.Opcode() != "HMMA" {
		t.Errorf("instruction 1: %+v, opcode %s", h, h.Opcode())
	}
	if op := s.Insts[2].Opcode(); op != "HMMA" {
		t.Errorf("predicated instruction's opcode %q", op)
	}
	if s.Samples() != 2000 {
		t.Errorf("samples %v, want 2000", s.Samples())
	}
	ops := s.ByOpcode()
	if len(ops) != 4 || ops[0].Name != "HMMA" || ops[0].Samples != 1800 || ops[0].Insts != 2 || ops[1].Name != "BAR" || ops[3].Name != "EXIT" {
		t.Errorf("by opcode %+v", ops)
	}
	if got := ops[0].topStalls(3); got != "short_scoreboard 72%, math_pipe_throttle 28%" {
		t.Errorf("HMMA's stalls %q", got)
	}
	if hot := s.Hottest(2); len(hot) != 2 || !strings.HasPrefix(hot[0].Name, "00007f0000000010 HMMA") || hot[1].Samples != 600 {
		t.Errorf("hottest %+v", hot)
	}
	if got, want := s.Brief(), "attn-bwd sampled at: HMMA 90% BAR 8% LDSM 2% EXIT 0%"; got != want {
		t.Errorf("brief %q, want %q", got, want)
	}
	var b strings.Builder
	if err := WriteSourceTables(&b, []Source{s}, 3); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### attn-bwd (`attn_bwd_kernel<__nv_bfloat16, 128, 128, 128, 1>`): 2000 warp-state samples over 5 instructions",
		"| HMMA | tensor-core product", "| 2 | 90.0 | short_scoreboard 72%, math_pipe_throttle 28% |",
		"| BAR | barrier | 1 | 8.5 | barrier 100% |",
		"| `00007f0000000010 HMMA.16816.F32.BF16 R12, R8, R16, R12 ;` | 60.0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "EXIT ;") {
		t.Errorf("an instruction without samples among the hottest:\n%s", b.String())
	}
}

func TestIsSourcePage(t *testing.T) {
	if !IsSourcePage([]byte(sourcePage)) {
		t.Error("the source page not recognised")
	}
	if IsSourcePage([]byte(profile)) {
		t.Error("a raw page taken for a source page")
	}
}

func TestReadSourceErrors(t *testing.T) {
	lines := strings.Split(sourcePage, "\n")
	for _, c := range []struct{ name, in, want string }{
		{"raw page", profile, "no header row"},
		{"no samples column", "\"Address\",\"Source\"\n\"0\",\"EXIT ;\"\n", "Warp Stall Sampling"},
		{"no source column", "\"Address\",\"Warp Stall Sampling (All Samples)\"\n\"0\",\"1\"\n", `no "Source" column`},
		{"no instructions", strings.Join(lines[:2], "\n") + "\n", "no instruction"},
		{"ragged row", strings.Join(lines[:2], "\n") + "\n\"0\",\"EXIT ;\"\n", "row 3 has 2 fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadSource(strings.NewReader(c.in), "x")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
