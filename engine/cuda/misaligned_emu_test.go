//go:build cudaemu && !cuda

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// misalignedChildEnv names the case a child process of
// TestEmuMisalignedAccessDies runs instead of the test.
const misalignedChildEnv = "TW_TEST_MISALIGNED_CHILD"

// shifted returns a tensor of n elements of dt that starts delta bytes past
// the start of a fresh device buffer. It bypasses engine.NewTensor's
// alignment check by shifting the buffer itself: the kernels then see the
// address a misaligned view would have given them.
func shifted(b *Backend, dt engine.DType, n, delta int) *engine.Tensor {
	buf, err := b.NewBuffer(n*dt.Size() + delta)
	if err != nil {
		panic(err)
	}
	d := bufOf(buf)
	return engine.NewTensor(&devBuffer{addr: d.addr + uintptr(delta), size: d.size - delta, dev: d.dev}, 0, dt, n)
}

// misalignedCases are kernels run on an operand at an address a GPU refuses
// (it raises cudaErrorMisalignedAddress); want matches what the emulator's
// alignment check must print: the kernel's source file and line (or that of
// vec.cuh or pack.cuh, whose loads and stores the element-wise kernels use),
// and the access.
var misalignedCases = []struct {
	name string
	run  func(b *Backend)
	want string
}{
	{"adamw_f32_param_at_byte_2", func(b *Backend) {
		const n = 37
		param := shifted(b, engine.F32, n, 2)
		grad, m, v := engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
		b.AdamW(param, grad, m, v, nil, engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Step: 1, GradScale: 1})
	}, `kernels/adamw\.cu:\d+:\d+: runtime error: load of misaligned address 0x[0-9a-f]+ for type 'float', which requires 4 byte alignment`},
	{"cast_f32_src_at_byte_2", func(b *Backend) {
		const n = 5
		b.Cast(engine.MustAlloc(b, engine.BF16, n), shifted(b, engine.F32, n, 2))
	}, `kernels/(elementwise\.cu|vec\.cuh|pack\.cuh):\d+:\d+: runtime error: load of misaligned address 0x[0-9a-f]+ for type 'const (float|uint32_t)', which requires 4 byte alignment`},
	{"cast_bf16_dst_at_byte_1", func(b *Backend) {
		const n = 5
		b.Cast(shifted(b, engine.BF16, n, 1), engine.MustAlloc(b, engine.F32, n))
	}, `kernels/(elementwise\.cu|vec\.cuh|pack\.cuh):\d+:\d+: runtime error: store to misaligned address 0x[0-9a-f]+ for type 'struct (__nv_bfloat16|Pack)', which requires 2 byte alignment`},
}

// TestEmuMisalignedAccessDies: the emulated kernels are built with an
// alignment check (kernels/emu/CMakeLists.txt), so a kernel that accesses
// memory at an address that is not a multiple of the accessed type's
// alignment dies here as it dies on a GPU, naming the kernel's file:line.
// Each case runs in a child process (this test binary again), which must
// die with that message.
func TestEmuMisalignedAccessDies(t *testing.T) {
	if name := os.Getenv(misalignedChildEnv); name != "" {
		for _, c := range misalignedCases {
			if c.name == name {
				b, err := New(Options{})
				if err != nil {
					t.Fatal(err)
				}
				c.run(b)
				b.Sync()
				fmt.Println("the kernel ran to its end")
				return
			}
		}
		t.Fatalf("%s=%s: no such case", misalignedChildEnv, name)
	}
	for _, c := range misalignedCases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEmuMisalignedAccessDies$", "-test.count=1")
			cmd.Env = append(os.Environ(), misalignedChildEnv+"="+c.name)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child did not die (%v); its output:\n%s%s", err, stdout.String(), stderr.String())
			}
			if !regexp.MustCompile(c.want).Match(stderr.Bytes()) {
				t.Errorf("the child died (%v), but its stderr does not match %q:\n%s", err, c.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), "misaligned") || strings.Contains(stdout.String(), "ran to its end") {
				t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}
