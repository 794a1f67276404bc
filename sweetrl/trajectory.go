package sweetrl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/zstdfile"
)

// Roles of dialogue turns.
const (
	// RoleUser marks a turn of the human (simulator).
	RoleUser = "user"
	// RoleAssistant marks a turn of the agent.
	RoleAssistant = "assistant"
)

// Turn is one entry of a dialogue history.
type Turn struct {
	// Role is RoleUser or RoleAssistant.
	Role string
	// Content is the text the other party saw: for an agent turn, the
	// visible part of its reply (see VisibleReply).
	Content string
	// Input is, for an agent turn, the exact prompt text the agent was
	// given (stored as "input"); empty for user turns.
	Input string
	// Output is, for an agent turn, the agent's whole generated text
	// (stored as "output"); empty for user turns.
	Output string
	// Extra holds the entry's fields this package does not know.
	Extra map[string]json.RawMessage
}

// Trajectory is one played episode in the reference implementation's record
// layout (see the package documentation).
type Trajectory struct {
	// Task is the task row the episode was played on.
	Task Task
	// DialogueHistory is the dialogue, starting with the user's problem
	// description.
	DialogueHistory []Turn
	// Answer is the agent's final answer.
	Answer string
	// Reward is the answer's score in [0, 1]; for backend tasks, the
	// fraction of unit tests passed.
	Reward float64
	// Extra holds the record's fields this package does not know.
	Extra map[string]json.RawMessage
}

// Keys of trajectory records and history entries.
const (
	keyTask    = "task"
	keyHistory = "dialogue_history"
	keyAnswer  = "answer"
	keyReward  = "reward"
	keyRole    = "role"
	keyContent = "content"
	keyInput   = "input"
	keyOutput  = "output"
)

// UnmarshalJSON decodes a history entry. role and content are required
// strings; role must be "user" or "assistant"; input and output, when
// present, must be strings.
func (t *Turn) UnmarshalJSON(b []byte) error {
	obj, err := decodeObject(b)
	if err != nil {
		return err
	}
	var nt Turn
	var ok bool
	if nt.Role, ok, err = stringField(obj, keyRole); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("missing %q", keyRole)
	}
	if nt.Role != RoleUser && nt.Role != RoleAssistant {
		return fmt.Errorf("role %q is not %q or %q", nt.Role, RoleUser, RoleAssistant)
	}
	if nt.Content, ok, err = stringField(obj, keyContent); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("missing %q", keyContent)
	}
	if nt.Input, _, err = stringField(obj, keyInput); err != nil {
		return err
	}
	if nt.Output, _, err = stringField(obj, keyOutput); err != nil {
		return err
	}
	nt.Extra = extraFields(obj, keyRole, keyContent, keyInput, keyOutput)
	*t = nt
	return nil
}

// MarshalJSON encodes the entry: role, content, then input and output when
// not empty, then Extra.
func (t Turn) MarshalJSON() ([]byte, error) {
	fs := []field{{keyRole, t.Role}, {keyContent, t.Content}}
	if t.Input != "" {
		fs = append(fs, field{keyInput, t.Input})
	}
	if t.Output != "" {
		fs = append(fs, field{keyOutput, t.Output})
	}
	return encodeObject(fs, t.Extra)
}

// UnmarshalJSON decodes a trajectory record. task (an object),
// dialogue_history (an array of entries), answer (a string) and reward (a
// number in [0, 1]) are required.
func (tr *Trajectory) UnmarshalJSON(b []byte) error {
	obj, err := decodeObject(b)
	if err != nil {
		return err
	}
	var nt Trajectory
	rawTask, ok := obj[keyTask]
	if !ok {
		return fmt.Errorf("missing %q", keyTask)
	}
	if err := json.Unmarshal(rawTask, &nt.Task); err != nil {
		return fmt.Errorf("%q: %w", keyTask, jsonerr.Reword(err))
	}
	rawHist, ok := obj[keyHistory]
	if !ok {
		return fmt.Errorf("missing %q", keyHistory)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(rawHist, &entries); err != nil || entries == nil {
		return fmt.Errorf("%q is not an array", keyHistory)
	}
	nt.DialogueHistory = make([]Turn, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal(e, &nt.DialogueHistory[i]); err != nil {
			return fmt.Errorf("%q entry %d: %w", keyHistory, i, jsonerr.Reword(err))
		}
	}
	if nt.Answer, ok, err = stringField(obj, keyAnswer); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("missing %q", keyAnswer)
	}
	rawReward, ok := obj[keyReward]
	if !ok {
		return fmt.Errorf("missing %q", keyReward)
	}
	if err := json.Unmarshal(rawReward, &nt.Reward); err != nil || bytes.Equal(bytes.TrimSpace(rawReward), []byte("null")) {
		return fmt.Errorf("%q is not a number", keyReward)
	}
	if !(nt.Reward >= 0 && nt.Reward <= 1) {
		return fmt.Errorf("%q %v is outside [0, 1]", keyReward, nt.Reward)
	}
	nt.Extra = extraFields(obj, keyTask, keyHistory, keyAnswer, keyReward)
	*tr = nt
	return nil
}

// MarshalJSON encodes the record: task, dialogue_history, answer, reward,
// then Extra. A reward that is not finite is an error.
func (tr Trajectory) MarshalJSON() ([]byte, error) {
	if math.IsNaN(tr.Reward) || math.IsInf(tr.Reward, 0) {
		return nil, fmt.Errorf("reward %v is not finite", tr.Reward)
	}
	hist := tr.DialogueHistory
	if hist == nil {
		hist = []Turn{}
	}
	return encodeObject([]field{
		{keyTask, tr.Task},
		{keyHistory, hist},
		{keyAnswer, tr.Answer},
		{keyReward, tr.Reward},
	}, tr.Extra)
}

// ReadTrajectories reads trajectories from r, one JSON object per line; name
// names r in errors. Blank lines are ignored. A malformed line ends the read
// with a *LineError naming the file and the line (see
// Trajectory.UnmarshalJSON for what is required); so does a line that is
// not valid UTF-8 or is longer than jsonl.DefaultMaxLine bytes.
func ReadTrajectories(r io.Reader, name string) ([]Trajectory, error) {
	var out []Trajectory
	err := ScanTrajectories(r, name, func(tr Trajectory, _ int) error {
		out = append(out, tr)
		return nil
	})
	return out, err
}

// ScanTrajectories reads trajectories from r as ReadTrajectories does,
// calling fn with each and the number of its line; an error from fn ends
// the read as a *LineError naming the file and that line.
func ScanTrajectories(r io.Reader, name string, fn func(tr Trajectory, line int) error) error {
	jr := jsonl.NewReader(r, name)
	for {
		line, lineNo, err := jr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var tr Trajectory
		if err := tr.UnmarshalJSON(line); err != nil {
			return &LineError{Name: name, Line: lineNo, Err: err}
		}
		if err := fn(tr, lineNo); err != nil {
			return &LineError{Name: name, Line: lineNo, Err: err}
		}
	}
}

// WriteTrajectories writes trajectories to w, one JSON object per line.
func WriteTrajectories(w io.Writer, trajs ...Trajectory) error {
	bw := bufio.NewWriter(w)
	for i, tr := range trajs {
		b, err := tr.MarshalJSON()
		if err != nil {
			return fmt.Errorf("writing trajectory %d: %w", i, err)
		}
		bw.Write(b)
		if err := bw.WriteByte('\n'); err != nil {
			return fmt.Errorf("writing trajectory %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing trajectories: %w", err)
	}
	return nil
}

// OpenTrajectories opens the trajectory file at path for reading,
// decompressing it when its name ends in ".zst".
func OpenTrajectories(path string) (io.ReadCloser, error) {
	return zstdfile.Open(path, "trajectories")
}

// LoadTrajectories reads every trajectory of the file at path (compressed
// or not, see OpenTrajectories); errors name the file.
func LoadTrajectories(path string) ([]Trajectory, error) {
	rc, err := OpenTrajectories(path)
	if err != nil {
		return nil, err
	}
	trajs, err := ReadTrajectories(rc, path)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", path, cerr)
	}
	return trajs, err
}

// SaveTrajectories writes trajs to the file at path, compressed with zstd
// when its name ends in ".zst", atomically: the file is filled under a
// temporary name in its directory, synced and renamed into place, so that
// path never holds part of the trajectories. Errors name the file.
func SaveTrajectories(path string, trajs []Trajectory) error {
	return outfile.Write(path, 0o644, func(w io.Writer) error {
		if !zstdfile.Compressed(path) {
			return WriteTrajectories(w, trajs...)
		}
		return zstdfile.Compress(w, func(zw io.Writer) error { return WriteTrajectories(zw, trajs...) })
	})
}

// MeanReward returns the mean reward of trajs (0 for none).
func MeanReward(trajs []Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		s += t.Reward
	}
	return s / float64(max(len(trajs), 1))
}

// SuccessRate returns the fraction of trajs with reward 1 (0 for none).
func SuccessRate(trajs []Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		if t.Reward == 1 {
			s++
		}
	}
	return s / float64(max(len(trajs), 1))
}
