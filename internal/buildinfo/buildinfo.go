// Package buildinfo says what a binary was built from: its version, the
// source revision, the Go version, the build tags and, for a -tags cuda
// build, the CUDA toolkit. It is read once from the build's own record
// (runtime/debug.ReadBuildInfo) and from two variables a build may set
// with the linker:
//
//	go build -ldflags "-X github.com/turnwise/turnwise/internal/buildinfo.commit=$(git rev-parse HEAD)"
//	go build -ldflags "-X github.com/turnwise/turnwise/internal/buildinfo.version=v0.1.0"
//
// Runs record it (a run directory's config.yaml, checkpoint manifests,
// benchmark results) so that a result can be traced to the binary that
// made it.
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X (see the package comment); empty unless a build sets
// them. They are the package's only variables and never change at run
// time.
var (
	// commit is the source revision, for builds without version-control
	// information (-buildvcs=false, a bundle built from an exported tree).
	commit string
	// version is the release version; without it, a tagged module
	// version from the build's record, else Devel.
	version string
)

// Devel is the Version of a build from an untagged tree.
const Devel = "devel"

// Info is what a binary was built from, with the names JSON and YAML
// files record it under.
type Info struct {
	Version  string `json:"version" yaml:"version"`                       // a release tag, or Devel
	Commit   string `json:"commit,omitempty" yaml:"commit,omitempty"`     // the source revision; empty when the build records none
	Modified bool   `json:"modified,omitempty" yaml:"modified,omitempty"` // built with uncommitted changes
	Go       string `json:"go" yaml:"go"`                                 // the Go toolchain's version
	Tags     string `json:"tags,omitempty" yaml:"tags,omitempty"`         // the build tags, comma-separated (cuda, cudaemu)
	CUDA     string `json:"cuda,omitempty" yaml:"cuda,omitempty"`         // the CUDA toolkit of a -tags cuda build ("12.8")
}

// Read returns the running binary's Info.
func Read() Info {
	info, _ := debug.ReadBuildInfo()
	return fromBuild(info, version, commit, cudaToolkit())
}

// pseudo matches the tail of a pseudo-version, which the go command stamps
// on a build from an untagged commit (v0.0.0-20260101120000-0123456789ab).
var pseudo = regexp.MustCompile(`\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// fromBuild returns the Info of a build whose record is info (nil: none),
// with the linker's version and commit ("" where unset) and the CUDA
// toolkit it was compiled against ("" for other builds).
func fromBuild(info *debug.BuildInfo, version, commit, cuda string) Info {
	i := Info{Version: version, Commit: commit, Go: runtime.Version(), CUDA: cuda}
	if info == nil {
		if i.Version == "" {
			i.Version = Devel
		}
		return i
	}
	if info.GoVersion != "" {
		i.Go = info.GoVersion
	}
	if v := info.Main.Version; i.Version == "" && v != "" && v != "(devel)" && !pseudo.MatchString(v) {
		i.Version = v
	}
	if i.Version == "" {
		i.Version = Devel
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if i.Commit == "" {
				i.Commit = s.Value
			}
		case "vcs.modified":
			i.Modified = s.Value == "true"
		case "-tags":
			i.Tags = s.Value
		}
	}
	return i
}

// commitText returns the commit, with " (modified)" for a build with
// uncommitted changes, or "unknown".
func (i Info) commitText() string {
	c := i.Commit
	if c == "" {
		c = "unknown"
	}
	if i.Modified {
		c += " (modified)"
	}
	return c
}

// Lines returns the Info as "name: value" lines, as train version prints
// it; a build without tags or CUDA says "none".
func (i Info) Lines() string {
	or := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	return fmt.Sprintf("version: %s\ncommit: %s\ngo: %s\ntags: %s\ncuda toolkit: %s\n",
		i.Version, i.commitText(), i.Go, or(i.Tags), or(i.CUDA))
}

// NoCommitNote is the note a result made by a binary without a commit
// carries: how to build one with it.
const NoCommitNote = "the binary carries no commit: build it with go build in a git checkout, or set -ldflags -X github.com/turnwise/turnwise/internal/buildinfo.commit=REV"
