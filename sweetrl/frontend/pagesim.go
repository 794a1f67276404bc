package frontend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// DefaultTargetCache is the number of target screenshots a PageSimulator
// keeps unless told otherwise: a rollout chunk plays a task's episodes
// side by side, so a few dozen targets cover one, and each is a full-page
// PNG (tens to hundreds of kilobytes).
const DefaultTargetCache = 64

// PageSimulator plays the human of frontend episodes for sweetrl's episode
// drivers (it is a sweetrl.Simulator, so that the lockstep rollouts of
// sweetrl/rl play frontend tasks as they play backend ones): it renders
// the page of the agent's last visible reply, if any, and the task's
// target page, and has Sim compare the screenshots, as RunEpisode does.
//
// Target screenshots are kept, the most recent CacheSize of them, so that
// a target is rendered about once per task rather than once per turn. It
// is safe for concurrent use when Renderer and Sim are.
type PageSimulator struct {
	Renderer Renderer
	Sim      Simulator
	// CacheSize is the number of target screenshots kept (0:
	// DefaultTargetCache).
	CacheSize int

	mu      sync.Mutex
	targets map[string][]byte // ground truth → its screenshot
	order   []string          // the keys of targets, oldest first
}

var _ sweetrl.Simulator = (*PageSimulator)(nil)

// Respond implements sweetrl.Simulator: history's last message is the
// agent's visible reply.
func (s *PageSimulator) Respond(ctx context.Context, task sweetrl.Task, history []tokenizer.Message) (string, error) {
	if len(history) == 0 || history[len(history)-1].Role != sweetrl.RoleAssistant {
		return "", errors.New("frontend: the simulator is asked to reply to no agent turn")
	}
	target, err := s.target(ctx, task.GroundTruth)
	if err != nil {
		return "", fmt.Errorf("rendering the target page: %w", err)
	}
	return respond(ctx, s.Renderer, s.Sim, history[len(history)-1].Content, target)
}

// target returns the screenshot of the target page, rendering it unless
// it is kept.
func (s *PageSimulator) target(ctx context.Context, page string) ([]byte, error) {
	s.mu.Lock()
	shot, ok := s.targets[page]
	s.mu.Unlock()
	if ok {
		return shot, nil
	}
	shot, err := s.Renderer.Render(ctx, page)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.targets == nil {
		s.targets = map[string][]byte{}
	}
	if _, ok := s.targets[page]; !ok {
		limit := s.CacheSize
		if limit <= 0 {
			limit = DefaultTargetCache
		}
		for len(s.order) >= limit {
			delete(s.targets, s.order[0])
			s.order = s.order[1:]
		}
		s.targets[page] = shot
		s.order = append(s.order, page)
	}
	return shot, nil
}
