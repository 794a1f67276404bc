// Package dist is what the processes of a data-parallel job share: who they
// are (Rank, read from torchrun's or Slurm's environment), a key-value store
// served by rank 0 over TCP, and the rendezvous through which every rank
// finds the others before a communicator (engine/gloo on CPUs, NCCL on GPUs)
// connects them.
package dist

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// DefaultMasterPort is torchrun's default port of rank 0's store.
const DefaultMasterPort = 29500

// Rank says which process of a job this is, and where the job meets.
type Rank struct {
	Rank           int    // global rank in [0, WorldSize)
	LocalRank      int    // rank on this node in [0, LocalWorldSize): the GPU ordinal
	WorldSize      int    // number of processes in the job
	LocalWorldSize int    // number of processes on this node
	MasterAddr     string // host of rank 0's store
	MasterPort     int    // port of rank 0's store
}

// Single is the rank of a process started alone: rank 0 of 1.
var Single = Rank{WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort}

// Env returns the environment variables, in torchrun's names, that start a
// process as this rank (as NAME=value).
func (r Rank) Env() []string {
	return []string{
		"RANK=" + strconv.Itoa(r.Rank),
		"LOCAL_RANK=" + strconv.Itoa(r.LocalRank),
		"WORLD_SIZE=" + strconv.Itoa(r.WorldSize),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(r.LocalWorldSize),
		"MASTER_ADDR=" + r.MasterAddr,
		"MASTER_PORT=" + strconv.Itoa(r.MasterPort),
	}
}

// Addr is rank 0's store address, host:port.
func (r Rank) Addr() string {
	host := r.MasterAddr
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") { // an IPv6 literal
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(r.MasterPort)
}

// String describes r for logs: its place among the ranks and the store it meets them at.
func (r Rank) String() string {
	return fmt.Sprintf("rank %d of %d (local %d of %d, store %s)", r.Rank, r.WorldSize, r.LocalRank, r.LocalWorldSize, r.Addr())
}

// FromEnv reads this process's rank from the environment (getenv is
// os.Getenv, or a map in tests):
//   - torchrun's (and train launch's): RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//   - else Slurm's (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the
//     tasks on this node from SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE,
//     MASTER_ADDR or else the first host of SLURM_JOB_NODELIST (or
//     SLURM_NODELIST), MASTER_PORT;
//   - else Single: a process alone.
//
// MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to 29500. A variable that
// is set but wrong is an error naming it.
func FromEnv(getenv func(string) string) (Rank, error) {
	names := map[string]string{"rank": "RANK", "world": "WORLD_SIZE", "local": "LOCAL_RANK", "localWorld": "LOCAL_WORLD_SIZE"}
	slurm := false
	if getenv("RANK") == "" && getenv("SLURM_PROCID") != "" {
		slurm = true
		names = map[string]string{"rank": "SLURM_PROCID", "world": "SLURM_NTASKS", "local": "SLURM_LOCALID"}
	} else if getenv("RANK") == "" {
		if getenv("WORLD_SIZE") != "" && getenv("WORLD_SIZE") != "1" {
			return Rank{}, fmt.Errorf("WORLD_SIZE=%s is set but RANK is not", getenv("WORLD_SIZE"))
		}
		r := Single
		if err := masterFromEnv(getenv, &r, false); err != nil {
			return Rank{}, err
		}
		return r, nil
	}
	var r Rank
	var err error
	intVar := func(name string, def int, min int) int {
		if err != nil {
			return 0
		}
		v := getenv(name)
		if v == "" {
			if def >= 0 {
				return def
			}
			err = fmt.Errorf("%s is not set (%s is)", name, names["rank"])
			return 0
		}
		n, e := strconv.Atoi(strings.TrimSpace(v))
		if e != nil || n < min {
			err = fmt.Errorf("%s=%q: want an integer ≥ %d", name, v, min)
			return 0
		}
		return n
	}
	r.Rank = intVar(names["rank"], -1, 0)
	r.WorldSize = intVar(names["world"], -1, 1)
	r.LocalRank = intVar(names["local"], 0, 0)
	if slurm {
		r.LocalWorldSize = 1
		if v := getenv("SLURM_NTASKS_PER_NODE"); v != "" {
			r.LocalWorldSize = intVar("SLURM_NTASKS_PER_NODE", 1, 1)
		} else if v := getenv("SLURM_TASKS_PER_NODE"); v != "" {
			// "4(x2),3": the first node's count; ranks are spread alike.
			n, e := strconv.Atoi(strings.SplitN(strings.SplitN(v, ",", 2)[0], "(", 2)[0])
			if e != nil || n < 1 {
				return Rank{}, fmt.Errorf("SLURM_TASKS_PER_NODE=%q: want a count such as 4 or 4(x2)", v)
			}
			r.LocalWorldSize = n
		}
		r.LocalWorldSize = max(r.LocalWorldSize, r.LocalRank+1)
	} else {
		r.LocalWorldSize = intVar("LOCAL_WORLD_SIZE", r.WorldSize, 1)
	}
	if err != nil {
		return Rank{}, err
	}
	switch {
	case r.Rank >= r.WorldSize:
		return Rank{}, fmt.Errorf("%s=%d is not below %s=%d", names["rank"], r.Rank, names["world"], r.WorldSize)
	case r.LocalRank >= r.LocalWorldSize:
		return Rank{}, fmt.Errorf("%s=%d is not below the %d processes on this node", names["local"], r.LocalRank, r.LocalWorldSize)
	case r.LocalWorldSize > r.WorldSize:
		return Rank{}, fmt.Errorf("%d processes on this node but %s=%d", r.LocalWorldSize, names["world"], r.WorldSize)
	}
	if err := masterFromEnv(getenv, &r, slurm); err != nil {
		return Rank{}, err
	}
	return r, nil
}

// masterFromEnv fills MasterAddr and MasterPort.
func masterFromEnv(getenv func(string) string, r *Rank, slurm bool) error {
	r.MasterAddr, r.MasterPort = "127.0.0.1", DefaultMasterPort
	if v := getenv("MASTER_ADDR"); v != "" {
		r.MasterAddr = v
	} else if slurm {
		list := getenv("SLURM_JOB_NODELIST")
		if list == "" {
			list = getenv("SLURM_NODELIST")
		}
		if list != "" {
			h, err := FirstHost(list)
			if err != nil {
				return fmt.Errorf("SLURM_JOB_NODELIST: %w (set MASTER_ADDR)", err)
			}
			r.MasterAddr = h
		}
	}
	if v := getenv("MASTER_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("MASTER_PORT=%q: want a port in [1, 65535]", v)
		}
		r.MasterPort = p
	}
	return nil
}

// nodeRange matches the first entry of a Slurm host list: a prefix and an
// optional bracketed range list, as in "gpu[003-005,010],cpu01".
var nodeRange = regexp.MustCompile(`^([^,\[]+)(?:\[([0-9]+)[^\]]*\])?`)

// FirstHost returns the first host of a Slurm node list: "node[07-09]" is
// node07, "a01,a02" a01.
func FirstHost(list string) (string, error) {
	m := nodeRange.FindStringSubmatch(strings.TrimSpace(list))
	if m == nil {
		return "", fmt.Errorf("node list %q: cannot read its first host", list)
	}
	return m[1] + m[2], nil
}
