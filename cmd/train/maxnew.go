package main

import (
	"fmt"
	"io"

	"github.com/turnwise/turnwise/model/llama"
)

// fitMaxNew caps --max-new to what the model's context leaves after a
// prompt of promptLen tokens (0: a prompt not known yet), saying so in one
// line on w; a prompt that fills the context is an error.
func fitMaxNew(c llama.Config, promptLen, maxNew int, w io.Writer) (int, error) {
	n, capped := c.FitNew(promptLen, maxNew)
	switch {
	case n <= 0:
		return 0, fmt.Errorf("the prompt's %d tokens fill the model's context of %d tokens: nothing can be generated", promptLen, c.MaxSeqLen)
	case capped && promptLen > 0:
		fmt.Fprintf(w, "--max-new %d capped at %d: the model's context is %d tokens, the prompt %d\n", maxNew, n, c.MaxSeqLen, promptLen)
	case capped:
		fmt.Fprintf(w, "--max-new %d capped at %d, the model's context\n", maxNew, n)
	}
	return n, nil
}
