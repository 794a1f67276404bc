package ncu

import (
	"strings"
	"testing"
)

// profile is a raw page as ncu writes it: a line of its own first, the
// header, the units, two launches (a templated name with commas inside
// quotes, a value with a thousands separator, one metric "n/a").
const profile = `==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","sm__warps_active.avg.pct_of_peak_sustained_active","sm__maximum_warps_per_active_cycle_pct","launch__registers_per_thread","launch__shared_mem_per_block_dynamic","launch__shared_mem_per_block_static","smsp__average_warp_latency_per_inst_issued.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio","l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared.sum","sm__cycles_elapsed.sum"
"","","","","","","","","","","","usecond","%","%","%","%","%","register/thread","Kbyte/block","byte/block","cycle","","","","","","","","cycle"
"0","4242","train","gpu","void attn_bwd_kernel<__nv_bfloat16, 128, 128, 1>(BwdArgs<__nv_bfloat16>)","1","7","(256, 1, 1)","(16, 8, 1)","0","9.0","1,234.5","61.25","40.5","38.75","12.5","12.5","255","164","0","22.4","5.1","2","1","0.75","2","1000","4000","5,000"
"1","4242","train","gpu","void attn_bwd_prep_kernel<float>(float *, float *)","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","10","5","80","n/a","50","100","32","0","0","3","0.1","2.5","1","0","0","0","0","0"
`

func TestRead(t *testing.T) {
	ks, err := Read(strings.NewReader(profile), "ours-bwd")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 {
		t.Fatalf("%d kernels, want 2", len(ks))
	}
	k := ks[0]
	if k.Name != "attn_bwd_kernel<__nv_bfloat16, 128, 128, 1>" || k.Case != "ours-bwd" || k.Grid != "(16, 8, 1)" || k.Block != "(256, 1, 1)" {
		t.Errorf("kernel %q case %q grid %q block %q", k.Name, k.Case, k.Grid, k.Block)
	}
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"gpu__time_duration.sum", 1234500}, // µs with a separator, to ns
		{"launch__shared_mem_per_block_dynamic", 164000},
		{"launch__registers_per_thread", 255},
		{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 61.25},
	} {
		if got := k.Metrics[c.metric]; got != c.want {
			t.Errorf("%s = %v, want %v", c.metric, got, c.want)
		}
	}
	if _, ok := ks[1].Metrics["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]; ok {
		t.Error("n/a read as a number")
	}
	if _, ok := k.Metrics["Device"]; ok {
		t.Error("a descriptive column read as a metric")
	}
}

// TestReadSizeMetrics: a raw page without the size columns (as some ncu
// versions write it) takes the grid and block from the launch metrics.
func TestReadSizeMetrics(t *testing.T) {
	const page = `"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream","launch__block_size","launch__grid_size","gpu__time_duration.sum"
"","","","","","","","","","","nsecond"
"0","1","a.out","h","addConst(double *, int)","2022-Nov-27 10:00:00","1","7","256","12288","239008"
`
	ks, err := Read(strings.NewReader(page), "c")
	if err != nil {
		t.Fatal(err)
	}
	if k := ks[0]; k.Name != "addConst" || k.Grid != "12288" || k.Block != "256" || k.Metrics["gpu__time_duration.sum"] != 239008 {
		t.Errorf("kernel %q grid %q block %q metrics %v", k.Name, k.Grid, k.Block, k.Metrics)
	}
}

func TestStalls(t *testing.T) {
	ks, err := Read(strings.NewReader(profile), "c")
	if err != nil {
		t.Fatal(err)
	}
	got := ks[0].Stalls()
	want := []Stall{{"barrier", 5.1}, {"long_scoreboard", 2}, {"mio_throttle", 2}, {"short_scoreboard", 0.75}}
	if len(got) != len(want) {
		t.Fatalf("stalls %v, want %v (selected left out)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stall %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestRow(t *testing.T) {
	ks, err := Read(strings.NewReader(profile), "ours-bwd")
	if err != nil {
		t.Fatal(err)
	}
	row := ks[0].Row()
	if len(row) != len(Header) {
		t.Fatalf("%d cells, header %d", len(row), len(Header))
	}
	cell := func(h string) string {
		for i, x := range Header {
			if x == h {
				return row[i]
			}
		}
		t.Fatalf("no column %q", h)
		return ""
	}
	for h, want := range map[string]string{
		"µs": "1234.5", "shared KiB": "160.2" /* 164 kB */, "tensor %": "38.8", "occupancy % (achieved / theoretical)": "12.5 / 12.5",
		"cycles per issue": "22.40", "shared bank conflicts %": "25.0", "DRAM %": "",
		"shared wavefronts per SM cycle": "0.80", /* 4000 wavefronts over 5000 SM cycles */
		"top stalls (cycles per issue)":  "barrier 5.10, long_scoreboard 2.00, mio_throttle 2.00",
	} {
		if got := cell(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, ks); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "`attn_bwd_kernel<__nv_bfloat16, 128, 128, 1>`") {
		t.Errorf("table:\n%s", b.String())
	}
	if got, want := ks[0].Brief(), "ours-bwd: 1234 µs SM 61% memory 40% tensor 39% occupancy 12% stall barrier 5.1"; got != want {
		t.Errorf("brief %q, want %q", got, want)
	}
}

func TestReadErrors(t *testing.T) {
	header := strings.SplitN(profile, "\n", 3)[1]
	for _, c := range []struct{ name, in, want string }{
		{"not ncu", "a,b\n1,2\n", "no header row"},
		{"no kernel column", "\"ID\",\"x__y\"\n\"0\",\"1\"\n", "no kernel column"},
		{"nothing profiled", header + "\n", "no kernel was profiled"},
		{"ragged row", header + "\n\"0\",\"1\"\n", "row 2 has 2 fields"},
		{"ragged row after the units", strings.Join(strings.SplitN(profile, "\n", 4)[:3], "\n") + "\n\"0\",\"1\"\n", "row 4 has 2 fields"},
		{"bad quoting", "\"ID\",\"Kernel Name\n", "ncu csv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in), "x")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
