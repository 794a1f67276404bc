package checkpoint_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/optim"
)

// state is what a trainer keeps besides tensors.
type state struct {
	Step    int `json:"step"`
	DataPos int `json:"data_pos"`
}

// A training loop saves a checkpoint every few steps, keeps the last two,
// and on start resumes from the newest one that is intact.
func Example() {
	run, err := os.MkdirTemp("", "run")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(run)

	b := cpu.New(cpu.Options{Threads: 1})
	w := engine.FromF32(b, engine.BF16, []float32{1, 2, 3, 4}, 2, 2)
	opt, err := optim.NewAdamW(b, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, map[string]*engine.Tensor{"w": w})
	if err != nil {
		log.Fatal(err)
	}
	engine.SetF32(b, opt.Grad(w), []float32{0.5, -0.5, 0.25, -0.25}) // as a backward pass would
	groups := map[string]checkpoint.Tensors{"model": {"w": w}}

	st := state{}
	if dir, skipped, err := checkpoint.Latest(run); err == nil {
		for _, s := range skipped {
			fmt.Println("skipping:", s)
		}
		if err := checkpoint.Load(dir, b, groups, opt, &st); err != nil {
			log.Fatal(err)
		}
	} else if !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		log.Fatal(err)
	}
	for st.Step < 6 {
		opt.Step(1e-3, 1)
		st.Step++
		st.DataPos += 8
		if st.Step%2 == 0 {
			if err := checkpoint.Save(checkpoint.Dir(run, st.Step), b, groups, opt, st, true); err != nil {
				log.Fatal(err)
			}
			if err := checkpoint.Prune(run, 2); err != nil {
				log.Fatal(err)
			}
		}
	}
	dir, _, err := checkpoint.Latest(run)
	if err != nil {
		log.Fatal(err)
	}
	entries, _ := os.ReadDir(run)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	fmt.Println("resume from", filepath.Base(dir))
	// Output:
	// step-000004
	// step-000006
	// resume from step-000006
}
