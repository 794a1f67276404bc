package buildinfo

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromBuild reads Info from build records as the go command writes
// them, with and without the linker's variables.
func TestFromBuild(t *testing.T) {
	rec := func(version string, settings ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/turnwise/turnwise", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return b
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name            string
		info            *debug.BuildInfo
		version, commit string // the linker's
		cuda            string
		want            Info
	}{
		{"no record", nil, "", "", "", Info{Version: Devel, Go: runtime.Version()}},
		{"no record, ldflags", nil, "v0.1.0", rev, "", Info{Version: "v0.1.0", Commit: rev, Go: runtime.Version()}},
		{"untagged checkout", rec("v0.0.0-20260101120000-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"), "", "", "",
			Info{Version: Devel, Commit: rev, Modified: true, Go: "go1.26.0"}},
		{"after a pre-release tag", rec("v0.2.0-rc.1.0.20260101120000-0123456789ab", "vcs.revision", rev, "vcs.modified", "false"), "", "", "",
			Info{Version: Devel, Commit: rev, Go: "go1.26.0"}},
		{"go run", rec("(devel)"), "", "", "", Info{Version: Devel, Go: "go1.26.0"}},
		{"tagged", rec("v0.3.0", "vcs.revision", rev), "", "", "", Info{Version: "v0.3.0", Commit: rev, Go: "go1.26.0"}},
		{"ldflags win", rec("v0.3.0", "vcs.revision", rev), "v0.3.1", "fedcba", "", Info{Version: "v0.3.1", Commit: "fedcba", Go: "go1.26.0"}},
		{"cuda", rec("", "-tags", "cuda", "vcs.revision", rev), "", "", "12.8", Info{Version: Devel, Commit: rev, Go: "go1.26.0", Tags: "cuda", CUDA: "12.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuild(tc.info, tc.version, tc.commit, tc.cuda); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLines checks train version's text, and that the JSON leaves out what
// a build does not have.
func TestLines(t *testing.T) {
	for _, tc := range []struct {
		info     Info
		want     string
		wantJSON string
	}{
		{Info{Version: Devel, Go: "go1.26.0"},
			"version: devel\ncommit: unknown\ngo: go1.26.0\ntags: none\ncuda toolkit: none\n",
			`{"version":"devel","go":"go1.26.0"}`},
		{Info{Version: Devel, Commit: "abc", Modified: true, Go: "go1.26.0", Tags: "cuda", CUDA: "12.8"},
			"version: devel\ncommit: abc (modified)\ngo: go1.26.0\ntags: cuda\ncuda toolkit: 12.8\n",
			`{"version":"devel","commit":"abc","modified":true,"go":"go1.26.0","tags":"cuda","cuda":"12.8"}`},
	} {
		if got := tc.info.Lines(); got != tc.want {
			t.Errorf("Lines:\n%s\nwant:\n%s", got, tc.want)
		}
		raw, err := json.Marshal(tc.info)
		if err != nil || string(raw) != tc.wantJSON {
			t.Errorf("JSON %s, %v; want %s", raw, err, tc.wantJSON)
		}
	}
}

// TestRead checks the test binary's own Info.
func TestRead(t *testing.T) {
	i := Read()
	if i.Version == "" || !strings.HasPrefix(i.Go, "go") {
		t.Errorf("Read() = %+v: want a version and the Go version", i)
	}
}
