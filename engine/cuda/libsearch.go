//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// runtimeLib names a shared library that the backend opens at run time
// (dlopen) instead of linking: cuBLASLt and NCCL. Both are looked for the
// same way, where toolkits and Python wheels put them:
//  1. the directories (searched for stem.N, newest N first) and files of
//     env, a colon-separated list, in that order;
//  2. then, newest major version first (majors, and any newer found): the
//     dynamic loader's search for stem.N (LD_LIBRARY_PATH, the ldconfig
//     cache), then the CUDA toolkit directories ($CUDA_HOME, $CUDA_PATH,
//     /usr/local/cuda*) and Python environments' NVIDIA wheels
//     (site-packages/nvidia/*/lib under $VIRTUAL_ENV, $CONDA_PREFIX,
//     ~/.local, /usr/local, /usr, /opt/conda and /opt/*/.venv).
type runtimeLib struct {
	stem     string         // the file name without its version: "libnccl.so"
	env      string         // the environment variable that names where to look first
	majors   []int          // major versions tried through the dynamic loader, newest first
	minMajor int            // older files are left out
	soname   *regexp.Regexp // matches stem.N[.M…], capturing N
}

func newRuntimeLib(stem, env string, minMajor int, majors ...int) runtimeLib {
	return runtimeLib{stem: stem, env: env, majors: majors, minMajor: minMajor,
		soname: regexp.MustCompile(`^` + regexp.QuoteMeta(stem) + `\.([0-9]+)(\.[0-9]+)*$`)}
}

// candidates lists, in the order to try them, the files and sonames to
// open: getenv reads the environment, roots are the directories under which
// the well-known locations are looked for ("/" on a machine; tests pass a
// temporary directory).
func (l runtimeLib) candidates(getenv func(string) string, roots []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range filepath.SplitList(getenv(l.env)) {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			for _, f := range l.filesIn([]string{p}) {
				add(f)
			}
		} else if p != "" {
			add(p)
		}
	}
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := getenv(env); v != "" {
			dirs = append(dirs, filepath.Join(v, "lib64"), filepath.Join(v, "lib"))
		}
	}
	var pyPrefixes []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v := getenv(env); v != "" {
			pyPrefixes = append(pyPrefixes, v)
		}
	}
	if home := getenv("HOME"); home != "" {
		pyPrefixes = append(pyPrefixes, filepath.Join(home, ".local"))
	}
	for _, r := range roots {
		for _, pat := range []string{"usr/local/cuda/lib64", "usr/local/cuda-*/lib64",
			"usr/local/cuda-*/targets/x86_64-linux/lib"} {
			dirs = append(dirs, glob(filepath.Join(r, pat))...)
		}
		for _, pat := range []string{"usr/local", "usr", "opt/conda", "opt/*/.venv", "opt/*/venv"} {
			pyPrefixes = append(pyPrefixes, glob(filepath.Join(r, pat))...)
		}
	}
	for _, p := range pyPrefixes {
		for _, pat := range []string{"lib/python3*/site-packages/nvidia/*/lib", "lib/python3*/dist-packages/nvidia/*/lib",
			"lib/python3/dist-packages/nvidia/*/lib"} {
			dirs = append(dirs, glob(filepath.Join(p, pat))...)
		}
	}
	files := l.filesIn(dirs)
	majors := slices.Clone(l.majors)
	for _, f := range files {
		if v := l.major(f); !slices.Contains(majors, v) {
			majors = append(majors, v)
		}
	}
	slices.SortFunc(majors, func(a, b int) int { return b - a })
	for _, v := range majors {
		add(fmt.Sprintf("%s.%d", l.stem, v)) // the dynamic loader's search
		for _, f := range files {
			if l.major(f) == v {
				add(f)
			}
		}
	}
	return out
}

func glob(pattern string) []string {
	m, _ := filepath.Glob(pattern) // the only error is a malformed pattern
	return m
}

// filesIn returns the library's files in dirs whose major version is at
// least minMajor: directory by directory, newest major version first,
// shortest name (the soname link) first.
func (l runtimeLib) filesIn(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		var fs []string
		for _, f := range glob(filepath.Join(d, l.stem+".*")) {
			if l.major(f) >= l.minMajor {
				fs = append(fs, f)
			}
		}
		slices.SortStableFunc(fs, func(a, b string) int {
			if va, vb := l.major(a), l.major(b); va != vb {
				return vb - va
			}
			return len(a) - len(b)
		})
		out = append(out, fs...)
	}
	return out
}

// major returns the major version in a file name of the library, or 0.
func (l runtimeLib) major(path string) int {
	m := l.soname.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(m[1])
	return v
}
