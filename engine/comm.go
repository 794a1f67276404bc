package engine

import (
	"strings"
	"time"
)

// Communicator runs collective operations among the ranks of a job: one
// process per rank, each with its own backend. Every rank calls the same
// collectives in the same order with tensors of the same dtypes and element
// counts; a collective returns when this rank's part is done (on a GPU, when
// it is queued on the backend's stream, ordered after the work already
// queued there). Sums run in the element dtype (bf16 sums round after every
// addition) in an order fixed by the world size, so runs repeat, and every
// rank receives the same bits. An error means the job cannot go on (a rank
// died, a timeout): the communicator is unusable afterwards.
//
// W is the world size and r this rank in the contracts below. A
// Communicator is not safe for concurrent use.
type Communicator interface {
	// Rank is this process's rank in [0, Size()).
	Rank() int
	// Size is the number of ranks, W.
	Size() int

	// AllReduce sums x across the ranks, in place: afterwards every rank's
	// x holds Σ over ranks of x. x f32|bf16, the same element count on
	// every rank.
	AllReduce(x *Tensor) error
	// ReduceScatter sums in across the ranks and leaves in out this rank's
	// block of the sum: out[i] = Σ over ranks of in[r·n + i].
	//   out [n] f32|bf16, in [W·n] of out's dtype (shapes may be any with
	//   these element counts)
	ReduceScatter(out, in *Tensor) error
	// AllGather concatenates every rank's in, in rank order, into out on
	// every rank: out[k·n + i] = in[i] of rank k.
	//   out [W·n], in [n], any one dtype
	AllGather(out, in *Tensor) error
	// Broadcast overwrites x on every rank with root's x. x any dtype, the
	// same element count on every rank.
	Broadcast(x *Tensor, root int) error
	// Barrier returns once every rank has entered it (on a GPU, once the
	// work queued before it on every rank is done).
	Barrier() error

	// Close releases the communicator's connections and resources.
	Close() error
}

// Store is a key-value store shared by the ranks of a job, through which
// they find each other (rendezvous): where to connect, a library's unique
// id. Keys are written once; values are opaque bytes. It is safe for
// concurrent use.
type Store interface {
	// Set stores value under key, replacing any earlier value.
	Set(key string, value []byte) error
	// Get returns the value of key, waiting up to timeout for some rank to
	// set it.
	Get(key string, timeout time.Duration) ([]byte, error)
	// Wait returns once every key is set, or after timeout with an error
	// that names the keys still missing (see MissingKeysError).
	Wait(keys []string, timeout time.Duration) error
}

// MissingKeysError is the error of a Store's Wait that timed out: the keys
// no rank set in time.
type MissingKeysError struct {
	Keys    []string
	Timeout time.Duration
}

// Error names the keys that were never set and how long they were waited for.
func (e *MissingKeysError) Error() string {
	return "keys never set within " + e.Timeout.String() + ": " + strings.Join(e.Keys, ", ")
}
