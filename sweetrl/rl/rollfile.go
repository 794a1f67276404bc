package rl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/sweetrl"
)

// FileRolloutOptions control RolloutToFile.
type FileRolloutOptions struct {
	// Path is the trajectory file written; it grows as Path.partial and
	// takes its name when every episode is in.
	Path string
	// Continue picks up the Path.partial an earlier run with the same
	// settings left, instead of refusing to replace it.
	Continue bool
	// Chunk is how many episodes are played together (≥ 1): the episodes
	// of a chunk advance in lockstep (see RunEpisodes), and each is
	// written as it ends. A continued run must use the Chunk of the run it
	// continues for its episodes to be the same.
	Chunk int
	// Log receives a line saying what a continued run kept (nil: none).
	Log io.Writer
	// Comm, when it joins several ranks, splits the chunks across them:
	// of each W consecutive chunks rank r plays the r-th, and the chunks
	// are gathered (through buffers of Backend, the backend Comm runs on)
	// so that rank 0 writes them to the file in task order. A chunk's
	// draws depend on its index alone (ChunkSeed), so the file is the one
	// a single process writes. Every rank gets every trajectory back. nil:
	// one process.
	Comm    engine.Communicator
	Backend engine.Backend
	// Order is the order of the file's episodes (RolloutJob): ByTask or
	// ByAttempt. A continued run must use the Order of the run it
	// continues.
	Order RolloutOrder
}

// RolloutOrder is the order in which a rollout of k episodes per task
// plays and writes its episodes.
type RolloutOrder int

const (
	// ByTask plays and writes the k episodes of the first task, then the
	// k of the second, and so on: turnwise's default.
	ByTask RolloutOrder = iota
	// ByAttempt plays and writes the first episode of every task, in
	// task order, then the second of every task, and so on: the layout the
	// reference's scripts expect of a rollout file (they assert that it
	// lists all tasks, then all tasks again).
	ByAttempt
)

// ParseRolloutOrder parses the --order flag: "task" (ByTask) or
// "reference" (ByAttempt).
func ParseRolloutOrder(s string) (RolloutOrder, error) {
	switch s {
	case "task":
		return ByTask, nil
	case "reference":
		return ByAttempt, nil
	}
	return 0, fmt.Errorf("--order %q: want task (every episode of a task together) or reference (all tasks, then all tasks again)", s)
}

// Episodes returns the episodes a rollout of k episodes per task plays, in
// order o: each one's task.
func (o RolloutOrder) Episodes(tasks []sweetrl.Task, k int) []sweetrl.Task {
	all := make([]sweetrl.Task, 0, k*len(tasks))
	if o == ByAttempt {
		for range k {
			all = append(all, tasks...)
		}
		return all
	}
	for _, t := range tasks {
		for range k {
			all = append(all, t)
		}
	}
	return all
}

// ChunkSeed returns the seed of chunk c's draws for a run seeded with
// seed: chunk 0 uses seed itself, each later chunk its own, so that a chunk
// plays the same whether or not the run was interrupted before it.
func ChunkSeed(seed uint64, c int) uint64 { return seed ^ uint64(c)*0xbf58476d1ce4e5b9 }

// RolloutToFile plays one episode of each task, in order, Chunk episodes at
// a time with the agent newAgent returns for that chunk (seed it with
// ChunkSeed for a continued run to match an uninterrupted one). Each
// episode is scored with scorer as soon as it ends and appended to
// Path.partial, synced, as soon as every episode before it is in: the
// file is always a prefix of the finished one, in order. When the last
// episode is in, the file is renamed to Path (see
// sweetrl.PartialTrajectories). A file under the name Path is thus always
// complete. With several ranks the unit written is a chunk: rank 0 appends
// each round's chunks as it gathers them.
//
// With Continue, the trajectories already in Path.partial are checked: a
// line the earlier run was cutting short is dropped, a damaged line is an
// error naming the file and the line, and each trajectory must be of the
// task its episode plays in this run; every whole line is kept (with
// several ranks, only whole chunks). The run goes on from the first episode
// not kept: its chunk is played again from its start, for its episodes to
// draw what an uninterrupted run's drew, and those the file holds are not
// written again. Without Continue an existing
// Path.partial is an error, so that no earlier work is lost unasked.
// It returns every trajectory of the file, the kept ones included.
func RolloutToFile(ctx context.Context, tasks []sweetrl.Task, newAgent func(chunk int) BatchAgent, sim sweetrl.Simulator,
	scorer sweetrl.Scorer, ro RolloutOptions, fo FileRolloutOptions) ([]sweetrl.Trajectory, error) {
	if fo.Chunk < 1 {
		return nil, fmt.Errorf("rollout: chunks of %d episodes", fo.Chunk)
	}
	rank, size := 0, 1
	if fo.Comm != nil {
		rank, size = fo.Comm.Rank(), fo.Comm.Size()
	}
	if rank != 0 {
		return rolloutRank(ctx, tasks, newAgent, sim, scorer, ro, fo)
	}
	partial := fo.Path + outfile.PartialSuffix
	var w *sweetrl.PartialTrajectories
	var done []sweetrl.Trajectory
	_, statErr := os.Stat(partial)
	switch {
	case statErr == nil && fo.Continue:
		var dropped int
		var err error
		// One process goes on from any episode; several ranks from a
		// chunk's first, as they play whole chunks.
		unit := 1
		if size > 1 {
			unit = fo.Chunk
		}
		w, done, dropped, err = sweetrl.ResumePartialTrajectories(fo.Path, func(trajs []sweetrl.Trajectory) (int, error) {
			return keepChunks(trajs, tasks, unit)
		})
		if err != nil {
			return nil, err
		}
		if fo.Log != nil {
			fmt.Fprintf(fo.Log, "continuing %s: %d of %d episodes done (%d unfinished lines dropped)\n", partial, len(done), len(tasks), dropped)
		}
	case statErr == nil:
		return nil, fmt.Errorf("%s exists, left by an unfinished run: continue it with --continue, or remove it", partial)
	case !errors.Is(statErr, os.ErrNotExist):
		return nil, statErr
	default:
		if fo.Continue && fo.Log != nil {
			fmt.Fprintf(fo.Log, "no %s to continue: starting afresh\n", partial)
		}
		var err error
		if w, err = sweetrl.CreatePartialTrajectories(fo.Path); err != nil {
			return nil, err
		}
	}
	defer w.Close() // after Commit, a no-op
	all := done
	if size == 1 {
		// From the chunk of the first episode the file lacks; each episode
		// is appended as soon as it and those before it have ended.
		for lo := len(done) / fo.Chunk * fo.Chunk; lo < len(tasks); lo += fo.Chunk {
			err := playChunkTo(ctx, tasks, lo, max(len(done)-lo, 0), newAgent, sim, scorer, ro, fo.Chunk, func(trajs []sweetrl.Trajectory) error {
				if err := w.Append(trajs...); err != nil {
					return err
				}
				all = append(all, trajs...)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	} else {
		// The other ranks learn where the file goes on, then play their
		// chunks; rank 0 appends each round's chunks in order.
		start := []byte(fmt.Sprint(len(done)))
		if _, err := engine.GatherBytes(fo.Comm, fo.Backend, start); err != nil {
			return nil, fmt.Errorf("rollout: telling the ranks where %s goes on: %w", partial, err)
		}
		err := rolloutRounds(ctx, tasks, len(done), newAgent, sim, scorer, ro, fo, func(trajs []sweetrl.Trajectory, lines []byte) error {
			// The lines as the rank that played them encoded them: the
			// bytes one process writes.
			if err := w.AppendEncoded(lines, len(trajs)); err != nil {
				return err
			}
			all = append(all, trajs...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}
	return all, nil
}

// playChunk plays and scores the chunk of episodes of tasks that starts at
// episode lo.
func playChunk(ctx context.Context, tasks []sweetrl.Task, lo int, newAgent func(chunk int) BatchAgent, sim sweetrl.Simulator,
	scorer sweetrl.Scorer, ro RolloutOptions, chunk int) ([]sweetrl.Trajectory, error) {
	var out []sweetrl.Trajectory
	err := playChunkTo(ctx, tasks, lo, 0, newAgent, sim, scorer, ro, chunk, func(trajs []sweetrl.Trajectory) error {
		out = append(out, trajs...)
		return nil
	})
	return out, err
}

// playChunkTo plays the chunk of episodes of tasks that starts at episode
// lo and hands its episodes to write, scored, in order, each as soon as it
// and every episode before it in the chunk have ended. The first skip
// episodes (those a continued file holds already) are played again, so
// that the others draw what they drew in an uninterrupted run, but they are
// neither scored nor written.
func playChunkTo(ctx context.Context, tasks []sweetrl.Task, lo, skip int, newAgent func(chunk int) BatchAgent, sim sweetrl.Simulator,
	scorer sweetrl.Scorer, ro RolloutOptions, chunk int, write func([]sweetrl.Trajectory) error) error {
	hi := min(lo+chunk, len(tasks))
	o := ro
	if o.Label != "" && (lo > 0 || hi < len(tasks)) {
		o.Label = fmt.Sprintf("%s %d–%d of %d", ro.Label, lo+1, hi, len(tasks))
	}
	ended := make([]*sweetrl.Trajectory, hi-lo) // the chunk's scored episodes, as they end
	next := 0                                   // the chunk's episodes before it are written (or skipped)
	o.Finished = func(idx []int, trajs []sweetrl.Trajectory) error {
		var mine []int
		var scored []sweetrl.Trajectory
		for k, i := range idx {
			if i >= skip {
				mine = append(mine, i)
				scored = append(scored, trajs[k])
			}
		}
		if len(scored) > 0 {
			if _, err := Score(ctx, scorer, scored); err != nil {
				return err
			}
		}
		for k, i := range mine {
			ended[i] = &scored[k]
		}
		var ready []sweetrl.Trajectory
		for ; next < len(ended) && (next < skip || ended[next] != nil); next++ {
			if next >= skip {
				ready = append(ready, *ended[next])
			}
		}
		if len(ready) == 0 {
			return nil
		}
		return write(ready)
	}
	_, err := RunEpisodes(ctx, tasks[lo:hi], newAgent(lo/chunk), sim, o)
	return err
}

// rolloutRank is RolloutToFile on a rank other than 0: it learns from rank
// 0 the episode the run goes on from, plays its chunks of each round and
// returns every trajectory from there on.
func rolloutRank(ctx context.Context, tasks []sweetrl.Task, newAgent func(chunk int) BatchAgent, sim sweetrl.Simulator,
	scorer sweetrl.Scorer, ro RolloutOptions, fo FileRolloutOptions) ([]sweetrl.Trajectory, error) {
	got, err := engine.GatherBytes(fo.Comm, fo.Backend, nil)
	if err != nil {
		return nil, fmt.Errorf("rollout: learning from rank 0 where %s goes on: %w", fo.Path, err)
	}
	start, err := strconv.Atoi(string(got[0]))
	if err != nil {
		return nil, fmt.Errorf("rollout: rank 0 goes on from episode %q: %w", got[0], err)
	}
	ro.Progress = nil
	var all []sweetrl.Trajectory
	err = rolloutRounds(ctx, tasks, start, newAgent, sim, scorer, ro, fo, func(trajs []sweetrl.Trajectory, _ []byte) error {
		all = append(all, trajs...)
		return nil
	})
	return all, err
}

// rolloutRounds plays the chunks from episode start on across the ranks
// of fo.Comm, W chunks a round, this rank the rank-th of each, and hands
// every chunk of each round to keep, in order, on every rank: its
// trajectories, and their lines as WriteTrajectories encoded them on the
// rank that played them.
func rolloutRounds(ctx context.Context, tasks []sweetrl.Task, start int, newAgent func(chunk int) BatchAgent, sim sweetrl.Simulator,
	scorer sweetrl.Scorer, ro RolloutOptions, fo FileRolloutOptions, keep func(trajs []sweetrl.Trajectory, lines []byte) error) error {
	rank, size := fo.Comm.Rank(), fo.Comm.Size()
	for round := start; round < len(tasks); round += size * fo.Chunk {
		var mine bytes.Buffer
		if lo := round + rank*fo.Chunk; lo < len(tasks) {
			trajs, err := playChunk(ctx, tasks, lo, newAgent, sim, scorer, ro, fo.Chunk)
			if err != nil {
				return err
			}
			if err := sweetrl.WriteTrajectories(&mine, trajs...); err != nil {
				return err
			}
		}
		chunks, err := engine.GatherBytes(fo.Comm, fo.Backend, mine.Bytes())
		if err != nil {
			return fmt.Errorf("rollout: gathering episodes %d on: %w", round+1, err)
		}
		for r, c := range chunks {
			if len(c) == 0 {
				continue
			}
			trajs, err := sweetrl.ReadTrajectories(bytes.NewReader(c), fmt.Sprintf("rank %d's chunk", r))
			if err != nil {
				return err
			}
			if err := keep(trajs, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepChunks checks that trajs are episodes of tasks, in order, and returns
// how many to keep: the whole chunks among them (chunk 1: every one).
func keepChunks(trajs []sweetrl.Trajectory, tasks []sweetrl.Task, chunk int) (int, error) {
	if len(trajs) > len(tasks) {
		return 0, fmt.Errorf("it holds %d trajectories, this run plays %d episodes: the run that wrote it had other settings", len(trajs), len(tasks))
	}
	for i, tr := range trajs {
		got, err1 := tr.Task.MarshalJSON()
		want, err2 := tasks[i].MarshalJSON()
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			return 0, fmt.Errorf("line %d is an episode of another task than episode %d of this run: the run that wrote it had other tasks or settings", i+1, i+1)
		}
	}
	if len(trajs) == len(tasks) { // every episode, the last chunk possibly short
		return len(trajs), nil
	}
	return len(trajs) / chunk * chunk, nil
}
