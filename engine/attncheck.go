package engine

// AttentionChecker is a Backend whose attention kernels run in a
// configuration chosen when it was made (the cuda backend's tile sizes) and
// that can say, before any launch, whether that configuration runs a model's
// attention: dtype dt at head width headDim, the forward, decoding and the
// backward.
type AttentionChecker interface {
	CheckAttention(dt DType, headDim int) error
}

// CheckAttention returns b's answer (AttentionChecker) for dt and headDim,
// or nil where b has no configuration to check.
func CheckAttention(b Backend, dt DType, headDim int) error {
	if c, ok := b.(AttentionChecker); ok {
		return c.CheckAttention(dt, headDim)
	}
	return nil
}
