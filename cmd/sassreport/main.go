// Command sassreport prints what internal/sass reads of the compiled kernel
// library, one line a kernel: its instructions, its loop over 16-byte packs
// and its longest loop (in instructions), the global loads it issues before
// it reads one, its 16-byte global loads and stores, and, from the ptxas
// report beside the library, its registers and spilled bytes. These are
// the quantities `TestKernelCode` holds some kernels to; the report shows
// them for every kernel, so that a change to one can be read before a GPU
// measures it.
//
//	make kernels-cuda
//	go run ./cmd/sassreport -match 'rmsnorm|swiglu' [-arch sm_90] [-lib build/cuda/libtwkernels_cuda.a]
//
// It needs binutils (ar, nm; c++filt for readable names) and the CUDA
// toolkit's cuobjdump.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/turnwise/turnwise/internal/sass"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sassreport:", err)
		os.Exit(1)
	}
}

// run parses args and writes the report to w.
func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("sassreport", flag.ContinueOnError)
	lib := fs.String("lib", "build/cuda/libtwkernels_cuda.a", "the kernel library `make kernels-cuda` builds (with ptxas.log beside it)")
	arch := fs.String("arch", "sm_90", "the machine code to read: sm_90 (H100, H200) or sm_80 (A100)")
	match := fs.String("match", "", "a regular expression the kernel's mangled or readable name must match, ignoring case (all kernels when empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return sass.Report(w, *lib, *arch, *match)
}
