package sweetrl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// numbered returns n trajectories told apart by their answers.
func numbered(n int) []Trajectory {
	out := make([]Trajectory, n)
	for i := range out {
		out[i] = sampleTrajectory()
		out[i].Answer = fmt.Sprintf("answer %d", i)
	}
	return out
}

// TestPartialTrajectoriesResume grows a file, cuts it as a full disk or a
// kill leaves it, and continues it.
func TestPartialTrajectoriesResume(t *testing.T) {
	for _, name := range []string{"roll.jsonl", "roll.jsonl.zst"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			all := numbered(6)
			w, err := CreatePartialTrajectories(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Append(all[:2]...); err != nil {
				t.Fatal(err)
			}
			if err := w.Append(all[2:4]...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s exists before the file is complete", path)
			}
			// The fifth line cut in the middle.
			raw, err := os.ReadFile(w.Name())
			if err != nil {
				t.Fatal(err)
			}
			whole := len(raw)
			line, _ := all[4].MarshalJSON()
			raw = append(raw, line[:len(line)/2]...)
			if err := os.WriteFile(w.Name(), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			var seen []Trajectory
			w, kept, dropped, err := ResumePartialTrajectories(path, func(trajs []Trajectory) (int, error) {
				seen = trajs
				return 3, nil // keep whole chunks of 3, say
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(seen, all[:4]) {
				t.Errorf("keep was given %d trajectories, want the 4 whole ones", len(seen))
			}
			if !reflect.DeepEqual(kept, all[:3]) || dropped != 2 || w.Len() != 3 {
				t.Errorf("kept %d, dropped %d, Len %d; want 3, 2 (the cut line and one not kept), 3", len(kept), dropped, w.Len())
			}
			if st, _ := os.Stat(w.Name()); st.Size() >= int64(whole) {
				t.Errorf("the partial file was not cut back: %d bytes", st.Size())
			}
			if err := w.Append(all[3:]...); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			got, err := LoadTrajectories(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, all) {
				t.Errorf("the committed file holds %d trajectories, not the 6 written", len(got))
			}
			if _, err := os.Stat(path + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the partial file remains after Commit")
			}
		})
	}
}

func TestPartialTrajectoriesResumeErrors(t *testing.T) {
	all := numbered(3)
	good := func() []byte {
		var b strings.Builder
		for _, tr := range all {
			l, _ := tr.MarshalJSON()
			b.Write(l)
			b.WriteByte('\n')
		}
		return []byte(b.String())
	}()
	tests := []struct {
		name    string
		content []byte // nil: no partial file
		keep    func([]Trajectory) (int, error)
		want    string
	}{
		{"no partial file", nil, nil, "roll.jsonl.partial"},
		{"damaged middle line", append([]byte("{oops\n"), good...), nil, "roll.jsonl.partial:1: not a JSON object"},
		{"invalid UTF-8 in a whole line", append(append([]byte{}, good...), []byte("{\"a\":\"\xff\"}\n")...), nil, "roll.jsonl.partial:4: invalid UTF-8"},
		{"keep refuses", good, func([]Trajectory) (int, error) { return 0, errors.New("trajectory 2 is of another task") }, "trajectory 2 is of another task"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "roll.jsonl")
			if tc.content != nil {
				if err := os.WriteFile(path+".partial", tc.content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			keep := tc.keep
			if keep == nil {
				keep = func(trajs []Trajectory) (int, error) { return len(trajs), nil }
			}
			_, _, _, err := ResumePartialTrajectories(path, keep)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if tc.content != nil {
				if after, _ := os.ReadFile(path + ".partial"); string(after) != string(tc.content) {
					t.Error("a refused resume changed the partial file")
				}
			}
		})
	}
}

// TestSaveTrajectoriesAtomic checks that a failed save leaves the earlier
// file as it was and no temporary file.
func TestSaveTrajectoriesAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	if err := SaveTrajectories(path, numbered(2)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	bad := numbered(3)
	bad[2].Reward = nan()
	if err := SaveTrajectories(path, bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("saving a NaN reward: %v, want an error naming %s", err, path)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a failed save changed the file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want 1", len(ents))
	}
}
