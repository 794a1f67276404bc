package bench

import (
	"runtime"
	"runtime/debug"
	"time"
)

// commit is the source revision, for builds without version-control
// information (a bundle built from an exported tree): set it with
//
//	go build -ldflags "-X github.com/turnwise/turnwise/bench.commit=$(git rev-parse HEAD)"
var commit string

// NewMeta returns the Meta of a run of our binary now: the commit it was
// built from (the ldflag above, else the build's version-control stamp), the
// Go version and the date. The caller fills in the device.
func NewMeta() Meta {
	m := Meta{
		Impl:     Ours,
		Commit:   commit,
		Date:     time.Now().UTC().Format(time.RFC3339),
		Versions: map[string]string{"go": runtime.Version()},
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if m.Commit == "" {
					m.Commit = s.Value
				}
			case "vcs.modified":
				m.Modified = s.Value == "true"
			}
		}
	}
	if m.Commit == "" {
		m.Notes = append(m.Notes, "the binary carries no commit: build it with go build in a git checkout, or set -ldflags -X github.com/turnwise/turnwise/bench.commit=REV")
	}
	return m
}
