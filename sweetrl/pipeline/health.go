package pipeline

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/turnwise/turnwise/sweetrl"
)

// Health describes how a policy's episodes look, beyond their reward: the
// signs of over-optimisation.
type Health struct {
	// Degenerate is the fraction of episodes with an agent reply that is
	// not text: invalid UTF-8, or control characters other than newline
	// and tab (the byte noise of a policy pushed far from its reference).
	Degenerate float64
	// NoAnswer is the fraction of episodes that ended at the turn limit
	// without the answer marker.
	NoAnswer float64
	// MeanTurns is the mean number of agent turns per episode.
	MeanTurns float64
}

// EpisodeHealth computes the Health of episodes.
func EpisodeHealth(eps []sweetrl.Trajectory) Health {
	var h Health
	if len(eps) == 0 {
		return h
	}
	for _, e := range eps {
		bad, answered, turns := false, false, 0
		for _, t := range e.DialogueHistory {
			if t.Role != sweetrl.RoleAssistant {
				continue
			}
			turns++
			out := t.Output
			if out == "" {
				out = t.Content
			}
			if !isText(out) {
				bad = true
			}
			if strings.Contains(t.Content, sweetrl.AnswerMarker) {
				answered = true
			}
		}
		if bad {
			h.Degenerate++
		}
		if !answered {
			h.NoAnswer++
		}
		h.MeanTurns += float64(turns)
	}
	n := float64(len(eps))
	h.Degenerate /= n
	h.NoAnswer /= n
	h.MeanTurns /= n
	return h
}

// isText reports whether s is valid UTF-8 with no control character other
// than newline and tab.
func isText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			return false
		}
	}
	return true
}

// timeSince is time.Since, named for the pipeline's clock.
func timeSince(t time.Time) time.Duration { return time.Since(t) }
