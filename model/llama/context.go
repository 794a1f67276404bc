package llama

import (
	"fmt"
	"io"
)

// FitNew returns how many tokens may follow a prompt of promptLen tokens
// within the model's context of MaxSeqLen tokens: maxNew, or what is left
// of the context when maxNew would overrun it (zero or less when the prompt
// fills it already). capped reports whether maxNew was reduced.
func (c Config) FitNew(promptLen, maxNew int) (n int, capped bool) {
	if left := c.MaxSeqLen - promptLen; maxNew > left {
		return left, true
	}
	return maxNew, false
}

// FitMaxNew caps a command's --max-new to what the model's context leaves
// after a prompt of promptLen tokens (0: a prompt not known yet), saying so
// in one line on w (FitNew); a prompt that fills the context is an error.
func (c Config) FitMaxNew(promptLen, maxNew int, w io.Writer) (int, error) {
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
