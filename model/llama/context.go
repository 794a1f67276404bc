package llama

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
