package dist

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
)

func TestFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    Rank
		wantErr string
	}{
		{name: "alone", env: map[string]string{}, want: Single},
		{name: "torchrun", env: map[string]string{"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
			"LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "node1", "MASTER_PORT": "1234"},
			want: Rank{Rank: 5, LocalRank: 1, WorldSize: 8, LocalWorldSize: 4, MasterAddr: "node1", MasterPort: 1234}},
		{name: "torchrun defaults", env: map[string]string{"RANK": "1", "WORLD_SIZE": "2"},
			want: Rank{Rank: 1, WorldSize: 2, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 29500}},
		{name: "slurm", env: map[string]string{"SLURM_PROCID": "6", "SLURM_LOCALID": "2", "SLURM_NTASKS": "8",
			"SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "gpu[007-008]", "MASTER_PORT": "29501"},
			want: Rank{Rank: 6, LocalRank: 2, WorldSize: 8, LocalWorldSize: 4, MasterAddr: "gpu007", MasterPort: 29501}},
		{name: "torchrun wins over slurm", env: map[string]string{"RANK": "0", "WORLD_SIZE": "1", "SLURM_PROCID": "3", "SLURM_NTASKS": "4"},
			want: Rank{Rank: 0, WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}},
		{name: "rank too large", env: map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, wantErr: "RANK=2 is not below WORLD_SIZE=2"},
		{name: "no world size", env: map[string]string{"RANK": "0"}, wantErr: "WORLD_SIZE is not set"},
		{name: "world without rank", env: map[string]string{"WORLD_SIZE": "4"}, wantErr: "RANK is not"},
		{name: "bad port", env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "x"}, wantErr: "MASTER_PORT"},
		{name: "bad rank", env: map[string]string{"RANK": "-1", "WORLD_SIZE": "2"}, wantErr: `RANK="-1"`},
		{name: "bad slurm count", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "x"},
			wantErr: "SLURM_TASKS_PER_NODE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromEnv(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			// Env round-trips.
			env := map[string]string{}
			for _, kv := range got.Env() {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			back, err := FromEnv(func(k string) string { return env[k] })
			if err != nil || back != got {
				t.Fatalf("Env() %v reads back as %+v, %v", got.Env(), back, err)
			}
		})
	}
}

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{"node[07-09]": "node07", "a01,a02": "a01", "single": "single", "x[3,5]": "x3"} {
		if got, err := FirstHost(in); err != nil || got != want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestStore(t *testing.T) {
	mem := NewMemStore()
	srv, err := Serve("127.0.0.1:0", mem)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := Dial(srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for name, s := range map[string]engine.Store{"mem": mem, "tcp": cl} {
		t.Run(name, func(t *testing.T) {
			k := name + "/a"
			go func() {
				time.Sleep(50 * time.Millisecond)
				mem.Set(k, []byte("value of "+k))
			}()
			v, err := s.Get(k, 5*time.Second)
			if err != nil || string(v) != "value of "+k {
				t.Fatalf("Get = %q, %v", v, err)
			}
			if err := s.Set(name+"/b", nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Wait([]string{k, name + "/b"}, time.Second); err != nil {
				t.Fatal(err)
			}
			err = s.Wait([]string{k, name + "/never", name + "/nor"}, 100*time.Millisecond)
			var mk *engine.MissingKeysError
			if !errors.As(err, &mk) || strings.Join(mk.Keys, ",") != name+"/never,"+name+"/nor" {
				t.Fatalf("Wait for missing keys: %v", err)
			}
			if _, err := s.Get(name+"/never", 50*time.Millisecond); !errors.As(err, &mk) {
				t.Fatalf("Get of a missing key: %v", err)
			}
		})
	}
}

func TestRendezvous(t *testing.T) {
	port := freePort(t)
	const world = 3
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Rendezvous(Rank{Rank: r, WorldSize: world, LocalRank: r, LocalWorldSize: world,
				MasterAddr: "127.0.0.1", MasterPort: port}, 10*time.Second)
			if err != nil {
				errs[r] = err
				return
			}
			// Every rank sees every other's key through the store.
			errs[r] = g.Store.Set(fmt.Sprintf("hello/%d", r), []byte{byte(r)})
			if errs[r] == nil {
				errs[r] = g.Store.Wait([]string{"hello/0", "hello/1", "hello/2"}, 10*time.Second)
			}
			// Rank 0 serves the store: it leaves last.
			if r == 0 {
				g.Store.Set("done/0", nil)
				g.Store.Wait([]string{"done/1", "done/2"}, 10*time.Second)
			} else {
				g.Store.Set(fmt.Sprintf("done/%d", r), nil)
			}
			g.Close()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestRendezvousMissingRank(t *testing.T) {
	port := freePort(t)
	const timeout = 500 * time.Millisecond
	var wg sync.WaitGroup
	errs := make([]error, 2)
	// Ranks 0 and 1 of 4 arrive; 2 and 3 never do.
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Rendezvous(Rank{Rank: r, WorldSize: 4, LocalWorldSize: 4, MasterAddr: "127.0.0.1", MasterPort: port}, timeout)
			if err == nil {
				g.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "ranks 2, 3 of 4 never arrived") {
			t.Errorf("rank %d: error %v, want one naming ranks 2, 3", r, err)
		}
	}
}

func TestRendezvousNoRankZero(t *testing.T) {
	port := freePort(t)
	_, err := Rendezvous(Rank{Rank: 1, WorldSize: 2, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "rank 0 of 2 never arrived") {
		t.Fatalf("error %v, want one naming rank 0", err)
	}
}

func TestRendezvousAlone(t *testing.T) {
	g, err := Rendezvous(Single, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Store.Set("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := g.Store.Get("k", time.Second); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}
