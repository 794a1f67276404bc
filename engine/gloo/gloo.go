// Package gloo is engine.Communicator for CPU ranks: Gloo, the collectives
// library PyTorch uses for CPU process groups (Debian's libgloo-dev), over
// its TCP transport, called through cgo and a small C shim (shim.cc). Ranks
// are separate processes, on one machine or several; they exchange their
// addresses through an engine.Store (rank 0's, from dist.Rendezvous).
//
// Tensors are CPU backend tensors (engine/cpu). Sums use Gloo's ring
// all-reduce: its order of additions depends only on the world size, so a
// run repeats bit for bit.
package gloo

// #cgo CXXFLAGS: -std=c++17 -O2
// #cgo LDFLAGS: -lgloo -lstdc++
// #include <stdlib.h>
// #include "gloo.h"
import "C"

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/cgo"
	"syscall"
	"time"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// Options configure a communicator.
type Options struct {
	// Iface is the network interface to bind (e.g. eth0); empty: the
	// GLOO_SOCKET_IFNAME environment variable, as PyTorch reads it, and
	// without it the interface of Hostname.
	Iface string
	// Hostname is resolved to choose the interface when no Iface is
	// given; empty: the local address this machine reaches MasterAddr from.
	Hostname string
	// MasterAddr is rank 0's host (dist.Rank.MasterAddr), used to choose
	// Hostname.
	MasterAddr string
	// Timeout bounds connecting and every collective; 0: 30 minutes (as
	// PyTorch's process groups), so that a rank busy writing a checkpoint is
	// waited for. A rank that dies is noticed at once all the same: its
	// connections close.
	Timeout time.Duration
	// Prefix separates this communicator's keys in the store from others';
	// empty: "gloo/".
	Prefix string
}

// Comm is a Gloo communicator. It implements engine.Communicator over CPU
// tensors.
type Comm struct {
	g          *C.tw_gloo
	rank, size int
}

var _ engine.Communicator = (*Comm)(nil)

const errLen = 1024

// New connects rank of size ranks: every rank of the job calls it with the
// same store.
func New(store engine.Store, rank, size int, opt Options) (*Comm, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("gloo: rank %d of %d", rank, size)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Minute
	}
	if opt.Prefix == "" {
		opt.Prefix = "gloo/"
	}
	if opt.Iface == "" {
		opt.Iface = os.Getenv("GLOO_SOCKET_IFNAME")
	}
	if opt.Iface == "" && opt.Hostname == "" {
		opt.Hostname = localAddrToward(opt.MasterAddr)
	}
	// Gloo writes to its sockets without MSG_NOSIGNAL: a rank that died
	// would kill this process with SIGPIPE, where its collective should
	// fail with an error. So SIGPIPE is ignored, process-wide, from here on
	// (writes to a closed pipe then fail with EPIPE).
	signal.Ignore(syscall.SIGPIPE)
	h := cgo.NewHandle(&glooStore{store: store, prefix: opt.Prefix, timeout: opt.Timeout})
	defer h.Delete()
	host, iface := C.CString(opt.Hostname), C.CString(opt.Iface)
	defer C.free(unsafe.Pointer(host))
	defer C.free(unsafe.Pointer(iface))
	var msg [errLen]C.char
	g := C.tw_gloo_connect(C.int(rank), C.int(size), host, iface, C.uintptr_t(h), C.int64_t(opt.Timeout.Milliseconds()),
		&msg[0], errLen)
	if g == nil {
		where := "interface " + opt.Iface
		if opt.Iface == "" {
			where = "the interface of " + opt.Hostname
		}
		return nil, fmt.Errorf("gloo: rank %d of %d connecting over %s: %s", rank, size, where, C.GoString(&msg[0]))
	}
	return &Comm{g: g, rank: rank, size: size}, nil
}

// localAddrToward returns the local IP address this machine uses to reach
// host (no packet is sent), or 127.0.0.1 for a local or unknown host.
func localAddrToward(host string) string {
	if host == "" || host == "localhost" {
		return "127.0.0.1"
	}
	c, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// result turns a shim call's status into an error naming the collective.
func (c *Comm) result(op string, rc C.int, msg *C.char) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("gloo: %s on rank %d of %d: %s", op, c.rank, c.size, C.GoString(msg))
}

// sumType returns the shim's dtype of a summed tensor.
func sumType(op string, t *engine.Tensor) C.int {
	switch t.DType() {
	case engine.F32:
		return C.TW_GLOO_F32
	case engine.BF16:
		return C.TW_GLOO_BF16
	}
	panic(fmt.Sprintf("gloo: %s of %v: want f32 or bf16", op, t))
}

// ptr returns the address of a CPU tensor's first byte (nil when empty).
func ptr(t *engine.Tensor) unsafe.Pointer {
	b := cpu.Bytes(t)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// AllReduce sums x across the ranks in place (engine.Communicator).
func (c *Comm) AllReduce(x *engine.Tensor) error {
	dt := sumType("AllReduce", x)
	if x.Numel() == 0 {
		return nil
	}
	var msg [errLen]C.char
	return c.result("AllReduce", C.tw_gloo_allreduce(c.g, ptr(x), C.size_t(x.Numel()), dt, &msg[0], errLen), &msg[0])
}

// ReduceScatter leaves this rank's block of the sum of in in out
// (engine.Communicator).
func (c *Comm) ReduceScatter(out, in *engine.Tensor) error {
	dt := sumType("ReduceScatter", out)
	if in.DType() != out.DType() || in.Numel() != c.size*out.Numel() {
		panic(fmt.Sprintf("gloo: ReduceScatter out %v, in %v: want in of out's dtype and %d× its elements", out, in, c.size))
	}
	if out.Numel() == 0 {
		return nil
	}
	var msg [errLen]C.char
	return c.result("ReduceScatter", C.tw_gloo_reduce_scatter(c.g, ptr(out), ptr(in), C.size_t(out.Numel()), dt, &msg[0], errLen), &msg[0])
}

// AllGather concatenates every rank's in into out (engine.Communicator).
func (c *Comm) AllGather(out, in *engine.Tensor) error {
	if in.DType() != out.DType() || out.Numel() != c.size*in.Numel() {
		panic(fmt.Sprintf("gloo: AllGather out %v, in %v: want out of in's dtype and %d× its elements", out, in, c.size))
	}
	if in.Numel() == 0 {
		return nil
	}
	var msg [errLen]C.char
	return c.result("AllGather", C.tw_gloo_allgather(c.g, ptr(out), ptr(in), C.size_t(in.Bytes()), &msg[0], errLen), &msg[0])
}

// Broadcast overwrites x with root's x (engine.Communicator).
func (c *Comm) Broadcast(x *engine.Tensor, root int) error {
	if root < 0 || root >= c.size {
		panic(fmt.Sprintf("gloo: Broadcast from root %d of %d ranks", root, c.size))
	}
	if x.Numel() == 0 {
		return nil
	}
	var msg [errLen]C.char
	return c.result("Broadcast", C.tw_gloo_broadcast(c.g, ptr(x), C.size_t(x.Bytes()), C.int(root), &msg[0], errLen), &msg[0])
}

// Barrier returns once every rank has entered it (engine.Communicator).
func (c *Comm) Barrier() error {
	var msg [errLen]C.char
	return c.result("Barrier", C.tw_gloo_barrier(c.g, &msg[0], errLen), &msg[0])
}

// Close releases the connections.
func (c *Comm) Close() error {
	if c.g != nil {
		C.tw_gloo_free(c.g)
		c.g = nil
	}
	return nil
}
