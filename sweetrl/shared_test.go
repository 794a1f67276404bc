package sweetrl

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/turnwise/turnwise/internal/testdata"
)

// TestSharedTasksRoundTrip checks that every real backend task row is
// written back as the same JSON value it was read from.
func TestSharedTasksRoundTrip(t *testing.T) {
	path := testdata.Path(t, "colbench", "backend_test.jsonl")
	tasks, err := LoadBackendTasks(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for i := 0; sc.Scan(); i++ {
		b, err := json.Marshal(tasks[i])
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		var want, got any
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("task %d written back differently:\n%s", i, b)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedEpisodesToZstd plays scripted episodes on real tasks and passes
// them through a compressed trajectory file.
func TestSharedEpisodesToZstd(t *testing.T) {
	tasks, err := LoadBackendTasks(testdata.Path(t, "colbench", "backend_test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tasks = tasks[:50]
	var trajs []Trajectory
	for i, task := range tasks {
		agent := &scriptedAgent{replies: []string{
			"OUTPUT: Could you tell me more about the inputs?",
			"OUTPUT: I WANT TO ANSWER:\n" + task.GroundTruth,
		}}
		tr, err := RunEpisode(context.Background(), task, agent, ScriptedSimulator{})
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if tr.Answer == "" || len(tr.DialogueHistory) != 4 {
			t.Fatalf("task %d: trajectory %+v", i, tr)
		}
		tr.Reward = float64(i%5) / 4
		trajs = append(trajs, tr)
	}
	path := filepath.Join(t.TempDir(), "episodes.jsonl.zst")
	if err := SaveTrajectories(path, trajs); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTrajectories(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, trajs) {
		t.Error("trajectories differ after the compressed round trip")
	}
}
