package rl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/trainer"
)

// Checkpoints control the periodic checkpoints of an RL trainer, in the
// run directory layout of train sft (checkpoint.Dir: RunDir/step-N, each
// the trained tensors, the optimizer and the loop's position), and its
// resume from them.
type Checkpoints struct {
	RunDir   string // where the checkpoints go ("": none, and no resume)
	Every    int    // optimizer steps between checkpoints; the last step is always saved (0: only it)
	Keep     int    // checkpoints kept (≥ 1)
	Compress bool   // zstd-compress the optimizer state
}

// CheckpointDefaults are the checkpoint flags' defaults of the RL
// trainers: a checkpoint every 100 steps, the newest 2 kept.
var CheckpointDefaults = Checkpoints{Every: 100, Keep: 2, Compress: true}

// due reports whether step (1, 2, …, of total) is saved.
func (c Checkpoints) due(step, total int) bool {
	return c.RunDir != "" && ((c.Every > 0 && step%c.Every == 0) || step == total)
}

// exactFloat is a float64 that survives JSON unchanged, NaN and ±Inf
// included: it is written as the shortest decimal text that reads back
// as the same value, in quotes.
type exactFloat float64

// MarshalJSON writes f as a quoted decimal ("NaN", "+Inf" and "-Inf" for
// the values JSON has no number for).
func (f exactFloat) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatFloat(float64(f), 'g', -1, 64)), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *exactFloat) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("want a quoted number, got %s", b)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*f = exactFloat(v)
	return nil
}

// prefState is what a preference run's checkpoint holds besides the
// weights and the optimizer (trainer.json): where the loop is — the
// epoch, and how many pairs of that epoch's shuffled order are done — and
// the statistics so far, so that a resumed run neither repeats nor skips a
// pair and reports what an uninterrupted one does.
type prefState struct {
	Step    int `json:"step"`    // optimizer steps taken
	Pairs   int `json:"pairs"`   // pairs the run trains on, checked on resume
	Epoch   int `json:"epoch"`   // the epoch in progress, from 0
	Offset  int `json:"offset"`  // pairs of its order done
	Skipped int `json:"skipped"` // steps skipped for a non-finite gradient
	// LossSum and AccSum are the epoch's sums so far (PrefStats' First and
	// Last values are made of them at its end).
	LossSum   exactFloat   `json:"loss_sum"`
	AccSum    exactFloat   `json:"acc_sum"`
	FirstLoss exactFloat   `json:"first_loss"`
	FirstAcc  exactFloat   `json:"first_acc"`
	LastLoss  exactFloat   `json:"last_loss"`
	LastAcc   exactFloat   `json:"last_acc"`
	Losses    []exactFloat `json:"losses"`
	// ChosenSum and RejectedSum are the epoch's sums so far of the chosen
	// and the rejected sides' log-ratios s_θ − s_ref; LastChosen and
	// LastRejected their means over the last epoch done.
	ChosenSum    exactFloat `json:"chosen_sum"`
	RejectedSum  exactFloat `json:"rejected_sum"`
	LastChosen   exactFloat `json:"last_chosen"`
	LastRejected exactFloat `json:"last_rejected"`
}

// stats returns the run's statistics as far as s records them.
func (s *prefState) stats() PrefStats {
	st := PrefStats{Pairs: s.Pairs, Steps: s.Step, Skipped: s.Skipped,
		FirstLoss: float64(s.FirstLoss), FirstAcc: float64(s.FirstAcc), LastLoss: float64(s.LastLoss), LastAcc: float64(s.LastAcc),
		LastChosen: float64(s.LastChosen), LastRejected: float64(s.LastRejected)}
	for _, l := range s.Losses {
		st.Losses = append(st.Losses, float64(l))
	}
	return st
}

// resumePref restores the newest valid checkpoint of c.RunDir into tp and
// s, if there is one, saying so on log (nil: nowhere); every rank of comm
// loads it. A checkpoint of a run on another number of pairs is refused.
func resumePref(c Checkpoints, tp *trainer.Params, comm engine.Communicator, s *prefState, log io.Writer) error {
	if c.RunDir == "" {
		return nil
	}
	if log == nil {
		log = io.Discard
	}
	dir, skipped, err := checkpoint.Latest(c.RunDir)
	for _, e := range skipped {
		fmt.Fprintf(log, "skipping a damaged checkpoint: %v\n", e)
	}
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return nil
	}
	if err != nil {
		return err
	}
	pairs := s.Pairs
	if err := tp.LoadCheckpoint(comm, dir, s); err != nil {
		return err
	}
	if s.Pairs != pairs {
		return fmt.Errorf("checkpoint %s was trained on %d pairs, this run forms %d: the run that wrote it had other trajectories or settings", dir, s.Pairs, pairs)
	}
	fmt.Fprintf(log, "resuming from %s: step %d, epoch %d, %d of its %d pairs done\n", dir, s.Step, s.Epoch+1, s.Offset, pairs)
	return nil
}

// stepsLeft returns the optimizer steps from s's position to the end of
// epochs epochs over n pairs, perStep pairs a step.
func (s *prefState) stepsLeft(n, perStep, epochs int) int {
	if s.Epoch >= epochs {
		return 0
	}
	perEpoch := (n + perStep - 1) / perStep
	return (n-s.Offset+perStep-1)/perStep + (epochs-1-s.Epoch)*perEpoch
}

// PairsFile is the file of an actor's run directory that holds the pairs
// its candidates formed, so that a resumed run trains on them rather than
// sampling and scoring every candidate again.
const PairsFile = "actor_pairs.jsonl"

// seqJSON and pairJSON are a PrefPair's lines in PairsFile.
type seqJSON struct {
	IDs []int32   `json:"ids"`
	W   []float32 `json:"w"`
}

type pairJSON struct {
	Chosen   seqJSON `json:"chosen"`
	Rejected seqJSON `json:"rejected"`
}

// SavePairs writes pairs to path atomically, a JSON line each.
func SavePairs(path string, pairs []PrefPair) error {
	return outfile.Write(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, p := range pairs {
			if err := enc.Encode(pairJSON{seqJSON(p.Chosen), seqJSON(p.Rejected)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadPairs reads the pairs SavePairs wrote; a damaged line or a sequence
// whose tokens and weights differ in number is an error naming the file
// and the line.
func LoadPairs(path string) ([]PrefPair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pairs []PrefPair
	r := jsonl.NewReader(f, path)
	r.SetMaxLine(1 << 30) // two sequences of any length a model takes
	for {
		line, n, err := r.Next()
		if err == io.EOF {
			return pairs, nil
		}
		if err != nil {
			return nil, err
		}
		var p pairJSON
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		for _, s := range []seqJSON{p.Chosen, p.Rejected} {
			if len(s.IDs) == 0 || len(s.IDs) != len(s.W) {
				return nil, fmt.Errorf("%s:%d: a sequence of %d tokens and %d weights", path, n, len(s.IDs), len(s.W))
			}
		}
		pairs = append(pairs, PrefPair{Chosen: Seq(p.Chosen), Rejected: Seq(p.Rejected)})
	}
}
