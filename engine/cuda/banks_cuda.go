//go:build cuda

package cuda

// countBanks runs nothing and returns false: on a GPU the profiler counts
// bank conflicts (see banks_emu.go).
func countBanks(f func()) ([]bankSite, bool) { return nil, false }
