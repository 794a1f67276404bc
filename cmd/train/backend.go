package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

// backendFlags say where a model runs and how: --backend, --gemm,
// --attention-config and --threads for every subcommand that runs a model,
// and --recompute for those that train one.
type backendFlags struct {
	backend   string // cpu or cuda
	gemm      string // cuda: own or cublas ("": cuBLASLt where one is found)
	attention string // cuda: the attention kernels' tiles, as cuda.ParseAttentionConfig reads them ("": defaults)
	threads   int    // cpu: worker threads (0: one per core)
	// clamp, set by register, is where open says that it lowered a
	// --threads above the machine's CPU count to that count; nil leaves
	// threads alone (a subcommand that sets them itself, such as demo).
	clamp     io.Writer
	device    int  // cuda: the GPU ordinal (not a flag: a rank's LOCAL_RANK)
	recompute bool // trainers: llama.Model.Recompute
}

// register adds --backend, --gemm and --threads.
func (f *backendFlags) register(fs *pflag.FlagSet) {
	f.registerDevice(fs)
	fs.IntVar(&f.threads, "threads", 0, "cpu: worker threads (0: one per core; more than the machine's CPUs: lowered to their count, with a notice)")
	f.clamp = fs.Output()
}

// registerDevice adds --backend, --gemm and --attention-config alone, for
// a subcommand that sets threads itself.
func (f *backendFlags) registerDevice(fs *pflag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "cpu", "cpu, or cuda (in a binary built with -tags cuda, or -tags cudaemu for the kernel emulator)")
	fs.StringVar(&f.gemm, "gemm", "", "cuda: the GEMM, cublas (cuBLASLt, opened at run time) or own (turnwise's tensor-core kernel); empty: cuBLASLt where one is found, else own")
	fs.StringVar(&f.attention, "attention-config", "", "cuda: the attention kernels' tile sizes and pipeline depths as `name=value,...` pairs, e.g. the best of a train bench sweep on this device (train bench --attention-configs lists them); empty: the kernels' defaults")
}

// registerTraining adds register's flags and --recompute.
func (f *backendFlags) registerTraining(fs *pflag.FlagSet) {
	f.register(fs)
	f.registerRecompute(fs)
}

// registerRecompute adds --recompute alone, for a flag set that has the
// others already.
func (f *backendFlags) registerRecompute(fs *pflag.FlagSet) {
	fs.BoolVar(&f.recompute, "recompute", false, "keep only each layer's input in the forward and recompute the rest in the backward: far less activation memory (train plan shows how much) for about one more forward pass")
}

// open returns a new backend as the flags say.
func (f *backendFlags) open() (engine.Backend, error) {
	switch f.backend {
	case "cpu":
		if f.gemm != "" {
			return nil, fmt.Errorf("--gemm %s: the cpu backend has one GEMM; --gemm chooses the cuda backend's", f.gemm)
		}
		if f.attention != "" {
			return nil, fmt.Errorf("--attention-config %s: the cpu backend has no attention tiles to set; --attention-config sets the cuda backend's", f.attention)
		}
		if n := runtime.NumCPU(); f.clamp != nil && f.threads > n {
			fmt.Fprintf(f.clamp, "--threads %d: this machine has %d CPUs; using %d threads\n", f.threads, n, n)
			f.threads = n
		}
		return cpu.New(cpu.Options{Threads: f.threads}), nil
	case "cuda":
		switch f.gemm {
		case "", "own", "cublas":
			return openCUDA(f.gemm, f.attention, f.device)
		}
		return nil, fmt.Errorf("unknown --gemm %q (want own or cublas)", f.gemm)
	}
	return nil, fmt.Errorf("unknown --backend %q (want cpu or cuda)", f.backend)
}

// apply sets the model options the flags carry.
func (f *backendFlags) apply(m *llama.Model) { m.Recompute = f.recompute }
