package enginetest_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// A shapeFault corrupts one result of one backend method: it adds 1 to the
// result's last element (its last row and column, which the spot checks
// always sample), in every call, or only in calls with a bf16 argument —
// the bf16 run of the self-reference mode, whose f32 reference then differs.
type shapeFault struct {
	op     string // the op of RunShapes that calls the method
	method string
}

var shapeFaults = []shapeFault{
	{"gemm", "Gemm"},
	{"attention", "Attention"},
	{"attention", "AttentionBackward"},
	{"rmsnorm", "RMSNormBackward"},
	{"rope", "RoPE"},
	{"swiglu", "SwiGLUBackward"},
	{"layernorm", "LayerNormBackward"},
	{"bias", "AddBiasBackward"},
	{"gelu", "GELU"},
	{"logsoftmax", "LogSoftmaxGatherBackward"},
	{"embedding", "EmbeddingBackward"},
	{"adamw_lora", "AdamWMulti"},
}

// The configurations each fault runs in: the self-reference mode with the
// fault in every call and in bf16 calls only, and the second-backend mode.
var faultModes = []string{"self_all", "self_bf16", "second_all"}

// TestRunShapesCatchesFaults runs RunShapes at the Mini shapes on a CPU
// backend with one result of one op corrupted, for each op, in a child
// process (the failures are the point), and checks that each mode's checks
// see it: in the self-reference mode the float64 spot checks (a fault in
// every call) and the full comparison with the f32 reference (a fault in
// the bf16 run alone), which leaves the f32 case passing; the GEMM peer; and
// the full comparison of the second-backend mode.
func TestRunShapesCatchesFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs RunShapes 36 times in a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunShapesFaultHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "TW_SHAPES_FAULT_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed with every fault:\n%s", out)
	}
	failed, msgs := parseTestOutput(out)
	for _, f := range shapeFaults {
		for _, mode := range faultModes {
			for _, dt := range []string{"f32", "bf16"} {
				name := strings.Join([]string{"TestRunShapesFaultHelper", f.method, mode, "mini", dt, f.op}, "/")
				var all string
				for n, m := range msgs {
					if n == name || strings.HasPrefix(n, name+"/") {
						all += strings.Join(m, "\n") + "\n"
					}
				}
				want := map[string][]string{
					"self_all":   {"float64 spot check"},
					"self_bf16":  {"against the reference"},
					"second_all": {"against the reference"},
				}[mode]
				if mode == "self_bf16" && dt == "f32" {
					want = nil // no bf16 call: nothing to see
				} else if f.op == "gemm" && mode == "self_all" {
					want = append(want, "against the GEMM peer")
				}
				if got := failed[name]; got != (want != nil) {
					t.Errorf("%s: failed = %v, want %v; its messages:\n%s", name, got, want != nil, all)
				}
				for _, w := range want {
					if !strings.Contains(all, w) {
						t.Errorf("%s: no message says %q; its messages:\n%s", name, w, all)
					}
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("the child's output:\n%s", out)
	}
}

// parseTestOutput returns, from a test binary's -test.v output, the tests
// that failed and the message lines each logged.
func parseTestOutput(out []byte) (failed map[string]bool, msgs map[string][]string) {
	failed, msgs = map[string]bool{}, map[string][]string{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "=== RUN") || strings.HasPrefix(line, "=== NAME") || strings.HasPrefix(line, "=== CONT"):
			cur = strings.TrimSpace(line[len("=== NAME"):])
		case strings.HasPrefix(trim, "--- FAIL: "):
			failed[strings.Fields(trim)[2]] = true
		case strings.HasPrefix(trim, "--- "):
		case cur != "" && strings.HasPrefix(line, "    "):
			msgs[cur] = append(msgs[cur], trim)
		}
	}
	return failed, msgs
}

// TestRunShapesFaultHelper is TestRunShapesCatchesFaults's child: it runs
// each fault's op in each mode and fails as the faults make it.
func TestRunShapesFaultHelper(t *testing.T) {
	if os.Getenv("TW_SHAPES_FAULT_HELPER") != "1" {
		t.Skip("run by TestRunShapesCatchesFaults")
	}
	for _, f := range shapeFaults {
		t.Run(f.method, func(t *testing.T) {
			for _, mode := range faultModes {
				t.Run(mode, func(t *testing.T) {
					b := &faulty{Backend: cpu.New(cpu.Options{}), method: f.method, bf16Only: mode == "self_bf16"}
					c := enginetest.ShapesConfig{Ops: []string{f.op}}
					if mode == "second_all" {
						c.Ref = cpu.New(cpu.Options{})
					} else if f.op == "gemm" {
						c.GEMMPeer = cpu.New(cpu.Options{})
					}
					enginetest.RunShapes(t, b, c, enginetest.Mini)
				})
			}
		})
	}
}

// faulty is a backend with one method's result corrupted (see shapeFault).
type faulty struct {
	engine.Backend
	method   string
	bf16Only bool
}

// corrupt adds 1 to the last element of x, the result of method, when the
// fault is that method's and applies to a call with these arguments.
func (f *faulty) corrupt(method string, x *engine.Tensor, args ...*engine.Tensor) {
	if method != f.method {
		return
	}
	if f.bf16Only {
		bf16 := false
		for _, a := range args {
			bf16 = bf16 || a != nil && a.DType() == engine.BF16
		}
		if !bf16 {
			return
		}
	}
	v := engine.ToF32(f.Backend, x)
	v[len(v)-1]++
	engine.SetF32(f.Backend, x, v)
}

func (f *faulty) Gemm(c, a, b *engine.Tensor, p engine.GemmParams) {
	f.Backend.Gemm(c, a, b, p)
	f.corrupt("Gemm", c, a)
}

func (f *faulty) Attention(out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	f.Backend.Attention(out, lse, q, k, v, seqs, p)
	f.corrupt("Attention", out, q)
}

func (f *faulty) AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	f.Backend.AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs, p)
	f.corrupt("AttentionBackward", dk, q)
}

func (f *faulty) RMSNormBackward(dx, dw, dOut, x, w, rstd *engine.Tensor) {
	f.Backend.RMSNormBackward(dx, dw, dOut, x, w, rstd)
	f.corrupt("RMSNormBackward", dw, x)
}

func (f *faulty) RoPE(x, pos, invFreq *engine.Tensor) {
	f.Backend.RoPE(x, pos, invFreq)
	f.corrupt("RoPE", x, x)
}

func (f *faulty) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	f.Backend.SwiGLUBackward(dGate, dUp, dOut, gate, up)
	f.corrupt("SwiGLUBackward", dUp, gate)
}

func (f *faulty) LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd *engine.Tensor) {
	f.Backend.LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd)
	f.corrupt("LayerNormBackward", db, x)
}

func (f *faulty) AddBiasBackward(db, dOut *engine.Tensor) {
	f.Backend.AddBiasBackward(db, dOut)
	f.corrupt("AddBiasBackward", db, dOut)
}

func (f *faulty) GELU(out, x *engine.Tensor, k engine.GELUKind) {
	f.Backend.GELU(out, x, k)
	f.corrupt("GELU", out, x)
}

func (f *faulty) LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *engine.Tensor) {
	f.Backend.LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets)
	f.corrupt("LogSoftmaxGatherBackward", dLogits, logits)
}

func (f *faulty) EmbeddingBackward(dTable, dOut, ids *engine.Tensor) {
	f.Backend.EmbeddingBackward(dTable, dOut, ids)
	f.corrupt("EmbeddingBackward", dTable, dOut)
}

func (f *faulty) AdamWMulti(t *engine.ParamTable, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	f.Backend.AdamWMulti(t, grad, m, v, master, p)
	f.corrupt("AdamWMulti", m, t.Spans()[0].W)
}
