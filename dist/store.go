package dist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// MemStore is an engine.Store in one process's memory: rank 0's store,
// which Server serves to the other ranks, and the whole store of a job of
// one process.
type MemStore struct {
	mu      sync.Mutex
	kv      map[string][]byte
	changed chan struct{} // closed and replaced on every Set
}

var _ engine.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{kv: map[string][]byte{}, changed: make(chan struct{})}
}

// Set stores a copy of value under key.
func (s *MemStore) Set(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[key] = slices.Clone(value)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Get returns key's value, waiting up to timeout for it.
func (s *MemStore) Get(key string, timeout time.Duration) ([]byte, error) {
	if err := s.Wait([]string{key}, timeout); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kv[key]), nil
}

// Wait returns once every key is set, or after timeout with a
// *engine.MissingKeysError.
func (s *MemStore) Wait(keys []string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var missing []string
		for _, k := range keys {
			if _, ok := s.kv[k]; !ok {
				missing = append(missing, k)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return &engine.MissingKeysError{Keys: missing, Timeout: timeout}
		}
	}
}

// The wire protocol between Client and Server: requests and replies are
// frames of a kind byte and length-prefixed (uint32, little-endian) fields.
//
//	request: op, key, value, timeout in ms (uint64)
//	reply:   status, value
//
// Wait's keys travel as the value, separated by NUL; a Wait or Get that
// timed out replies statusMissing with the missing keys the same way.
const (
	opSet  = 1
	opGet  = 2
	opWait = 3

	statusOK      = 0
	statusMissing = 1
	statusError   = 2

	maxField = 1 << 30 // no key or value is larger
)

// Server serves a MemStore over TCP to the other ranks.
type Server struct {
	store *MemStore
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// Serve listens on addr (host:port; port 0 picks a free one) and serves
// store to every client until Close.
func Serve(addr string, store *MemStore) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("store: listening on %s: %w", addr, err)
	}
	s := &Server{store: store, ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening and drops every client.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers one client's requests in order until it hangs up.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		op, err := r.ReadByte()
		if err != nil {
			return
		}
		key, err1 := readField(r)
		val, err2 := readField(r)
		var ms uint64
		err3 := binary.Read(r, binary.LittleEndian, &ms)
		if err := errors.Join(err1, err2, err3); err != nil {
			return
		}
		timeout := time.Duration(ms) * time.Millisecond
		var reply []byte
		status := byte(statusOK)
		switch op {
		case opSet:
			s.store.Set(string(key), val)
		case opGet:
			reply, err = s.store.Get(string(key), timeout)
		case opWait:
			err = s.store.Wait(splitKeys(val), timeout)
		default:
			status, reply = statusError, []byte(fmt.Sprintf("unknown request %d", op))
		}
		var mk *engine.MissingKeysError
		if errors.As(err, &mk) {
			status, reply = statusMissing, []byte(strings.Join(mk.Keys, "\x00"))
		}
		if writeFrame(c, status, reply) != nil {
			return
		}
	}
}

// Client is an engine.Store served by a Server on another process. It is
// safe for concurrent use (requests are sent one at a time).
type Client struct {
	mu   sync.Mutex
	addr string
	conn net.Conn
	r    *bufio.Reader
}

var _ engine.Store = (*Client)(nil)

// Dial connects to the server at addr, trying again until timeout while
// nothing listens there yet (rank 0 may start last).
func Dial(addr string, timeout time.Duration) (*Client, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			return &Client{addr: addr, conn: c, r: bufio.NewReader(c)}, nil
		}
		if time.Now().Add(100 * time.Millisecond).After(deadline) {
			return nil, fmt.Errorf("store: nothing answered at %s within %v: %w", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close hangs up.
func (c *Client) Close() error { return c.conn.Close() }

// Set stores value under key.
func (c *Client) Set(key string, value []byte) error {
	_, err := c.call(opSet, key, value, 0)
	return err
}

// Get returns key's value, waiting up to timeout for it.
func (c *Client) Get(key string, timeout time.Duration) ([]byte, error) {
	return c.call(opGet, key, nil, timeout)
}

// Wait returns once every key is set, or after timeout with a
// *engine.MissingKeysError.
func (c *Client) Wait(keys []string, timeout time.Duration) error {
	_, err := c.call(opWait, "", []byte(strings.Join(keys, "\x00")), timeout)
	return err
}

func (c *Client) call(op byte, key string, val []byte, timeout time.Duration) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var buf []byte
	buf = append(buf, op)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(key)))
	buf = append(buf, key...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(val)))
	buf = append(buf, val...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(timeout.Milliseconds()))
	// The server answers a waiting request at its timeout; allow a margin.
	c.conn.SetDeadline(time.Now().Add(timeout + 30*time.Second))
	if _, err := c.conn.Write(buf); err != nil {
		return nil, fmt.Errorf("store %s: %w", c.addr, err)
	}
	status, err := c.r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("store %s: no reply (did rank 0 exit?): %w", c.addr, err)
	}
	reply, err := readField(c.r)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", c.addr, err)
	}
	switch status {
	case statusOK:
		return reply, nil
	case statusMissing:
		return nil, &engine.MissingKeysError{Keys: splitKeys(reply), Timeout: timeout}
	}
	return nil, fmt.Errorf("store %s: %s", c.addr, reply)
}

func splitKeys(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

func readField(r io.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, err
	}
	if n > maxField {
		return nil, fmt.Errorf("a field of %d bytes (the limit is %d)", n, maxField)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w io.Writer, status byte, val []byte) error {
	buf := append([]byte{status}, binary.LittleEndian.AppendUint32(nil, uint32(len(val)))...)
	_, err := w.Write(append(buf, val...))
	return err
}
