package sass

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Members lists the object files of the static library lib (binutils' ar).
func Members(lib string) ([]string, error) {
	out, err := exec.Command("ar", "t", lib).Output()
	if err != nil {
		return nil, fmt.Errorf("ar t %s: %w", lib, toolErr(err))
	}
	return strings.Fields(string(out)), nil
}

// Disassemble returns the machine code for arch ("sm_90", "sm_80") of the
// kernels of member, an object file of the static library lib, whose
// mangled names begin with one of prefixes, or of every kernel in it when
// no prefix is given. It runs binutils' ar and nm and the CUDA toolkit's
// cuobjdump; an error names the library, the member and the tool. The
// names come from the member's host symbols (each kernel has a launch stub
// of its name), so that cuobjdump prints only those kernels: a whole
// member takes it up to half a minute.
func Disassemble(lib, member, arch string, prefixes ...string) ([]Function, error) {
	return withMember(lib, member, func(o string) ([]Function, error) {
		args := []string{"-sass", "-arch", arch}
		if len(prefixes) > 0 {
			syms, err := defined(lib, member, o)
			if err != nil {
				return nil, err
			}
			var names []string
			for _, name := range syms {
				for _, p := range prefixes {
					if strings.HasPrefix(name, p) && !slices.Contains(names, name) {
						names = append(names, name)
					}
				}
			}
			if len(names) == 0 {
				return nil, fmt.Errorf("%s(%s): no kernel named %s…", lib, member, strings.Join(prefixes, "…, "))
			}
			args = append(args, "-fun", strings.Join(names, ","))
		}
		out, err := exec.Command("cuobjdump", append(args, o)...).Output()
		if err != nil {
			return nil, fmt.Errorf("cuobjdump %s %s(%s): %w", strings.Join(args[:3], " "), lib, member, toolErr(err))
		}
		fns, err := Parse(bytes.NewReader(out))
		if err != nil {
			return nil, fmt.Errorf("%s(%s) for %s: %w", lib, member, arch, err)
		}
		return fns, nil
	})
}

// Symbols lists the symbols member of the static library lib defines
// (binutils' nm): each kernel's launch stub among them, by its mangled name.
func Symbols(lib, member string) ([]string, error) {
	return withMember(lib, member, func(o string) ([]string, error) { return defined(lib, member, o) })
}

// withMember writes member of lib to a file of a temporary directory,
// calls f with its path and removes the directory.
func withMember[T any](lib, member string, f func(o string) (T, error)) (T, error) {
	var zero T
	dir, err := os.MkdirTemp("", "sass")
	if err != nil {
		return zero, err
	}
	defer os.RemoveAll(dir)
	body, err := exec.Command("ar", "p", lib, member).Output()
	if err != nil {
		return zero, fmt.Errorf("ar p %s %s: %w", lib, member, toolErr(err))
	}
	if len(body) == 0 {
		return zero, fmt.Errorf("%s: no member %s", lib, member)
	}
	o := filepath.Join(dir, filepath.Base(member))
	if err := os.WriteFile(o, body, 0o644); err != nil {
		return zero, err
	}
	return f(o)
}

// defined lists the symbols the object file o (member of lib) defines.
func defined(lib, member, o string) ([]string, error) {
	out, err := exec.Command("nm", "--defined-only", "-P", o).Output()
	if err != nil {
		return nil, fmt.Errorf("nm %s(%s): %w", lib, member, toolErr(err))
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

// toolErr adds what a tool wrote to stderr to its exit error.
func toolErr(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
