package dist

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// DefaultTimeout is how long a rendezvous waits for every rank.
const DefaultTimeout = 5 * time.Minute

// Group is this process's place in a job whose ranks have all arrived: its
// Rank and the job's Store (served by rank 0).
type Group struct {
	Rank
	Store   engine.Store
	Timeout time.Duration // the rendezvous's, for what is built on it

	server *Server
	client *Client
}

// rankKeyPrefix and the rank make the key a rank sets when it arrives.
const rankKeyPrefix = "rendezvous/rank/"

func rankKey(r int) string { return rankKeyPrefix + strconv.Itoa(r) }

// Rendezvous joins r's job: rank 0 serves the store on MasterPort (on every
// interface); the other ranks connect to it at MasterAddr:MasterPort; every
// rank announces itself and waits until all WorldSize ranks have. After
// timeout it fails with an error naming the ranks that never arrived. A job
// of one process needs no network: its store is in memory.
func Rendezvous(r Rank, timeout time.Duration) (*Group, error) {
	g := &Group{Rank: r, Timeout: timeout}
	start := time.Now()
	switch {
	case r.WorldSize == 1:
		g.Store = NewMemStore()
	case r.Rank == 0:
		mem := NewMemStore()
		srv, err := Serve(net.JoinHostPort("", strconv.Itoa(r.MasterPort)), mem)
		if err != nil {
			return nil, fmt.Errorf("rendezvous: rank 0: %w", err)
		}
		g.Store, g.server = mem, srv
	default:
		c, err := Dial(r.Addr(), timeout)
		if err != nil {
			return nil, fmt.Errorf("rendezvous at %s: rank 0 of %d never arrived within %v (its store did not answer): %w",
				r.Addr(), r.WorldSize, timeout, err)
		}
		g.Store, g.client = c, c
	}
	if err := g.Store.Set(rankKey(r.Rank), []byte(strconv.Itoa(r.LocalRank))); err != nil {
		g.Close()
		return nil, fmt.Errorf("rendezvous at %s: %w", r.Addr(), err)
	}
	keys := make([]string, r.WorldSize)
	for i := range keys {
		keys[i] = rankKey(i)
	}
	deadline := start.Add(timeout)
	for {
		// Short waits, so that a rank other than 0 also sees rank 0's
		// verdict when rank 0 gives up first (and then stops serving).
		err := g.Store.Wait(keys, max(min(time.Until(deadline), pollEvery), time.Millisecond))
		if err == nil {
			return g, nil
		}
		var mk *engine.MissingKeysError
		if !errors.As(err, &mk) {
			g.Close()
			return nil, fmt.Errorf("rendezvous at %s: %w", r.Addr(), err)
		}
		if r.Rank != 0 {
			if v, e := g.Store.Get(failedKey, time.Millisecond); e == nil {
				g.Close()
				return nil, errors.New(string(v))
			}
		}
		if time.Now().Before(deadline) {
			continue
		}
		var missing []int
		for _, k := range mk.Keys {
			if n, e := strconv.Atoi(strings.TrimPrefix(k, rankKeyPrefix)); e == nil {
				missing = append(missing, n)
			}
		}
		slices.Sort(missing)
		failure := fmt.Errorf("rendezvous at %s: %s of %d never arrived within %v", r.Addr(), rankList(missing), r.WorldSize, timeout)
		if r.Rank == 0 && g.server != nil {
			// Tell the ranks that did arrive, and give them time to read it.
			g.Store.Set(failedKey, []byte(failure.Error()))
			time.Sleep(linger)
		}
		g.Close()
		return nil, failure
	}
}

// failedKey holds rank 0's error when its rendezvous timed out; pollEvery is
// how often the others look for it, and linger how long rank 0 keeps
// serving it.
const (
	failedKey = "rendezvous/failed"
	pollEvery = 250 * time.Millisecond
	linger    = 4 * pollEvery
)

// rankList says "rank 3" or "ranks 1, 2".
func rankList(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// Close leaves the job: rank 0 stops serving the store, the others hang up.
// Call it when the job's collectives are done.
func (g *Group) Close() error {
	var err error
	if g.server != nil {
		err = g.server.Close()
		g.server = nil
	}
	if g.client != nil {
		err = errors.Join(err, g.client.Close())
		g.client = nil
	}
	return err
}
