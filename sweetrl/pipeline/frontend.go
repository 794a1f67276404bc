package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/frontend/render"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// ErrNoCLIP is the error of a frontend job that must score pages and was
// given no CLIP weights.
var ErrNoCLIP = errors.New("frontend tasks are scored by the cosine of CLIP ViT-B/32 image embeddings, " +
	"and no CLIP weights were given (a Hugging Face openai/clip-vit-base-patch32 directory: config.json and " +
	"model.safetensors; they are not bundled); there is no substitute metric")

// frontendState is what an Env opens for frontend tasks: one browser for
// the simulator and the scorer, and the CLIP tower.
type frontendState struct {
	renderer *render.Renderer
	clip     *clip.Model
}

// CheckScorer returns ErrNoCLIP for the frontend family without CLIP
// weights, so that a job that will score pages stops before loading
// anything; nil otherwise.
func (e *Env) CheckScorer() error {
	if e.Family == "frontend" && e.CLIP == "" {
		return ErrNoCLIP
	}
	return nil
}

// Rules returns the family's training rules: for frontend tasks the
// reference's pairs (frontend.TrajectoryPairs: every two attempts of a
// task whose similarities differ by at least 0.1, the higher chosen) and
// each task's best attempt for rejection fine-tuning
// (frontend.BestAttempts); for the others the backend rules (the zero
// rl.Rules).
func (e *Env) Rules() rl.Rules {
	if e.Family != "frontend" {
		return rl.Rules{}
	}
	return rl.Rules{Pairs: frontend.TrajectoryPairs, Imitate: frontend.BestAttempts,
		Imitated: "best attempts of their tasks (each task's highest similarity)"}
}

// Close releases what the Env opened: the browser and the CLIP tower.
func (e *Env) Close() error {
	if e.fe.clip != nil {
		e.fe.clip.Close()
		e.fe.clip = nil
	}
	if e.fe.renderer != nil {
		err := e.fe.renderer.Close()
		e.fe.renderer = nil
		return err
	}
	return nil
}

// pages returns the frontend's renderer, starting it on first use.
func (e *Env) pages() (pageRenderer, error) {
	if e.fe.renderer == nil {
		r, err := render.New(e.Render)
		if err != nil {
			return pageRenderer{}, err
		}
		e.fe.renderer = r
	}
	return pageRenderer{e.fe.renderer}, nil
}

// frontendSimulator returns the frontend family's simulator: the vision
// model behind HTTP or the scripted one, shown screenshots by a
// frontend.PageSimulator.
func (e *Env) frontendSimulator() (sweetrl.Simulator, *sweetrl.HTTPSimulator, error) {
	var sim frontend.Simulator
	var hs *sweetrl.HTTPSimulator
	switch k := e.SimulatorKind(); k {
	case "scripted":
		sim = frontend.ScriptedSimulator{}
	case "http":
		h, err := frontend.NewHTTPSimulator(e.HTTP)
		if err != nil {
			return nil, nil, err
		}
		sim, hs = h, h.Client
	default:
		return nil, nil, fmt.Errorf("simulator %q for frontend tasks: want http (a vision model shown both screenshots) or scripted", k)
	}
	r, err := e.pages()
	if err != nil {
		return nil, nil, err
	}
	return &frontend.PageSimulator{Renderer: r, Sim: sim}, hs, nil
}

// frontendScorer returns the frontend family's scorer, CLIP's tower on b.
func (e *Env) frontendScorer(b engine.Backend) (sweetrl.Scorer, string, error) {
	if err := e.CheckScorer(); err != nil {
		return nil, "", err
	}
	if e.fe.clip == nil {
		m, err := clip.Load(b, e.CLIP)
		if err != nil {
			return nil, "", err
		}
		e.fe.clip = m
	}
	r, err := e.pages()
	if err != nil {
		return nil, "", err
	}
	c, o := e.fe.clip.Config, e.fe.renderer.Options()
	desc := fmt.Sprintf("the cosine of CLIP image embeddings (%s: %d layers, width %d, patch %d) of pages rendered offline in %s (%d tabs, %v a page)",
		e.CLIP, c.Layers, c.Hidden, c.Patch, o.Chromium, o.Tabs, o.Timeout)
	return frontend.Scorer{Renderer: r, Embedder: e.fe.clip}, desc, nil
}

// pageRenderer is the browser as package frontend wants it: a page that
// fails (times out, crashes its tab) is render.BlackPNG, as the reference
// scores a page it could not render.
type pageRenderer struct{ r *render.Renderer }

var _ frontend.BatchRenderer = pageRenderer{}

// Render implements frontend.Renderer.
func (p pageRenderer) Render(ctx context.Context, html string) ([]byte, error) {
	shot, err := p.r.Render(ctx, html)
	if errors.Is(err, render.ErrPageFailed) {
		return render.BlackPNG(), nil
	}
	return shot, err
}

// RenderAll implements frontend.BatchRenderer.
func (p pageRenderer) RenderAll(ctx context.Context, pages []string) ([][]byte, error) {
	got, err := p.r.RenderAll(ctx, pages)
	if err != nil {
		return nil, err
	}
	shots := make([][]byte, len(got))
	for i, g := range got {
		shots[i] = g.Image()
	}
	return shots, nil
}

// EvalJob is train eval on the Env's family: rl.EvalJob, and for frontend
// tasks the mean CLIP cosine and, when against names another method's
// episodes of the same tasks (a trajectory file, one episode a task), the
// win rate against it with tie margin margin. The other method's answers
// are scored again with this job's scorer, so that both sides have the
// same metric.
func (e *Env) EvalJob(ctx context.Context, eps rl.Episodes, seeds int, out, against string, margin float64) (rl.EvalResult, error) {
	if e.Family != "frontend" {
		if against != "" {
			return rl.EvalResult{}, errors.New("a win rate against another method's answers is measured on frontend tasks only")
		}
		return rl.EvalJob(ctx, eps, seeds, out)
	}
	var other []sweetrl.Trajectory
	if against != "" {
		if seeds != 1 {
			return rl.EvalResult{}, fmt.Errorf("a win rate compares one episode of each task with the other method's: %d seeds, want 1", seeds)
		}
		var err error
		if other, err = sweetrl.LoadTrajectories(against); err != nil {
			return rl.EvalResult{}, err
		}
		if other, err = sameTasks(other, eps.Tasks, against); err != nil {
			return rl.EvalResult{}, err
		}
	}
	s, trajs, err := rl.EvalEpisodes(ctx, eps, seeds, out)
	if err != nil {
		return rl.EvalResult{}, err
	}
	fmt.Fprintf(eps.Log, "mean CLIP cosine %.4f ± %.4f (%d tasks, %d episodes; each task's mean, cosines clipped to [0, 1])\n",
		s.PassRate, s.PassCI, s.Tasks, s.Episodes)
	if other != nil {
		if err := winRate(ctx, eps.Log, eps.Scorer, trajs, other, against, margin); err != nil {
			return rl.EvalResult{}, err
		}
	}
	eps.ReportSimulator()
	return eps.Result(s, seeds, out), nil
}

// sameTasks returns the trajectories of other (read from name) whose tasks
// are among tasks, and an error naming the first task it lacks.
func sameTasks(other []sweetrl.Trajectory, tasks []sweetrl.Task, name string) ([]sweetrl.Trajectory, error) {
	want := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		want[t.ProblemDescription] = true
	}
	have := map[string]bool{}
	var kept []sweetrl.Trajectory
	for _, tr := range other {
		if want[tr.Task.ProblemDescription] {
			kept = append(kept, tr)
			have[tr.Task.ProblemDescription] = true
		}
	}
	for i, t := range tasks {
		if !have[t.ProblemDescription] {
			return nil, fmt.Errorf("%s: no episode of task %d (%.60q)", name, i+1, t.ProblemDescription)
		}
	}
	return kept, nil
}

// winRate scores other's answers with scorer and prints the win rate of
// trajs against them.
func winRate(ctx context.Context, log io.Writer, scorer sweetrl.Scorer, trajs, other []sweetrl.Trajectory, name string, margin float64) error {
	if _, err := rl.Score(ctx, scorer, other); err != nil {
		return fmt.Errorf("scoring the answers of %s: %w", name, err)
	}
	a, b, err := frontend.AlignByTask(trajs, other)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	w, err := frontend.CompareWinRate(a, b, margin)
	if err != nil {
		return err
	}
	mb, err := frontend.MeanCosine(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "win rate against %s: %.1f%% [%.1f, %.1f] (%d wins, %d ties, %d losses of %d tasks, tie margin %g; its mean cosine %.4f)\n",
		name, 100*w.Rate, 100*w.Lo, 100*w.Hi, w.Wins, w.Ties, w.Losses, len(a), margin, mb)
	return nil
}
