package bench

import (
	"time"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// NewMeta returns the Meta of a run of our binary now: what it was built
// from (buildinfo.Read: the version, the commit, the Go version and the
// build tags) and the date. The caller fills in the device and the CUDA
// toolkit.
func NewMeta() Meta {
	b := buildinfo.Read()
	m := Meta{
		Impl:     Ours,
		Version:  b.Version,
		Commit:   b.Commit,
		Modified: b.Modified,
		Tags:     b.Tags,
		Date:     time.Now().UTC().Format(time.RFC3339),
		Versions: map[string]string{"go": b.Go},
	}
	if m.Commit == "" {
		m.Notes = append(m.Notes, buildinfo.NoCommitNote)
	}
	return m
}
