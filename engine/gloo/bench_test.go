package gloo

import (
	"fmt"
	"testing"
	"time"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// benchPeer is rank 1 of BenchmarkAllReduce: it receives (bytes, count)
// from rank 0 and all-reduces count tensors of that size, until a count of 0.
func benchPeer(b engine.Backend, c *Comm) error {
	ctl := engine.MustAlloc(b, engine.I32, 2)
	for {
		if err := c.Broadcast(ctl, 0); err != nil {
			return err
		}
		v := engine.ToI32(b, ctl)
		if v[1] == 0 {
			return nil
		}
		if err := benchRun(b, c, int(v[0]), int(v[1])); err != nil {
			return err
		}
	}
}

// benchRun all-reduces an f32 tensor of nbytes, count times.
func benchRun(b engine.Backend, c *Comm, nbytes, count int) error {
	x := engine.MustAlloc(b, engine.F32, nbytes/4)
	for range count {
		if err := c.AllReduce(x); err != nil {
			return err
		}
	}
	return c.Barrier()
}

// BenchmarkAllReduce measures Gloo's all-reduce of f32 tensors of 1, 16 and
// 64 MiB between this process (rank 0) and a second one (rank 1) on this
// machine. MB/s is the algorithm bandwidth (bytes per rank / time);
// bus-GB/s, nccl-tests' bus bandwidth, 2(W−1)/W times it.
func BenchmarkAllReduce(bm *testing.B) {
	port := freePort(bm)
	peers := start(bm, "bench", 2, port, true)
	r := dist.Rank{Rank: 0, WorldSize: 2, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}
	g, err := dist.Rendezvous(r, 30*time.Second)
	if err != nil {
		bm.Fatal(err)
	}
	defer g.Close()
	c, err := New(g.Store, 0, 2, Options{MasterAddr: r.MasterAddr, Timeout: 60 * time.Second})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	b := cpu.New(cpu.Options{Threads: 1})
	ctl := engine.MustAlloc(b, engine.I32, 2)
	for _, mib := range []int{1, 16, 64} {
		bm.Run(fmt.Sprintf("MiB=%d", mib), func(bm *testing.B) {
			nbytes := mib << 20
			engine.SetI32(b, ctl, []int32{int32(nbytes), int32(bm.N)})
			if err := c.Broadcast(ctl, 0); err != nil {
				bm.Fatal(err)
			}
			bm.SetBytes(int64(nbytes))
			bm.ResetTimer()
			if err := benchRun(b, c, nbytes, bm.N); err != nil {
				bm.Fatal(err)
			}
			bm.StopTimer()
			const w = 2
			alg := float64(nbytes) * float64(bm.N) / bm.Elapsed().Seconds() / 1e9
			bm.ReportMetric(alg*2*(w-1)/w, "bus-GB/s")
		})
	}
	engine.SetI32(b, ctl, []int32{0, 0})
	if err := c.Broadcast(ctl, 0); err != nil {
		bm.Fatal(err)
	}
	for _, p := range peers {
		if err := p.Wait(); err != nil {
			bm.Errorf("rank 1: %v\n%s", err, p.Stderr)
		}
	}
}
