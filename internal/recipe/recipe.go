// Package recipe gives a command's flags a configuration file: a YAML
// mapping from flag names to values, which the command line overrides, and
// the resolved configuration of a run, saved in its directory so that a
// resume with other settings is noticed.
//
// A recipe is flat:
//
//	# the critic at the reference's settings
//	lr: 2e-7
//	epochs: 4
//	lora-targets: [q, k, v, o]   # a list is a comma-separated flag value
//
// Keys are flag names without dashes; a key no flag has, a nested mapping
// or a value the flag refuses is an error naming the file and line. The
// one exception is BuildKey, the mapping in which Save records the binary
// that wrote the file (buildinfo.Info): reading ignores it, so that a run's
// saved configuration given back as --config reproduces the run.
package recipe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/turnwise/turnwise/internal/buildinfo"
	"github.com/turnwise/turnwise/internal/outfile"
)

// FlagName is the flag that names a recipe file, which commands register.
const FlagName = "config"

// BuildKey is the key under which Save records what the binary that wrote
// the file was built from; it names no flag, and reading a recipe skips
// it.
const BuildKey = "build"

// Register adds --config, the flag naming a recipe, to fs.
func Register(fs *pflag.FlagSet) {
	fs.String(FlagName, "", "a YAML recipe of this subcommand's flags (flag: value); flags given on the command line override it")
}

// Parse parses args into fs, then sets from the recipe that --config names,
// if any, every flag the command line left unset (see Apply).
func Parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if path, _ := fs.GetString(FlagName); path != "" {
		return Apply(fs, path)
	}
	return nil
}

// Apply reads the recipe at path and sets each flag it names that the
// command line has not set (call it after fs.Parse). A value equal to the
// flag's own (its default, as Values writes it) leaves the flag untouched,
// not marked as changed, so that a saved configuration, which names every
// flag, sets only what differs. Keys in skip are refused: flags that a
// recipe must not set (where a run's output goes, --config itself).
func Apply(fs *pflag.FlagSet, path string, skip ...string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("recipe: %w", err)
	}
	entries, err := parse(raw, path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		where := fmt.Sprintf("%s:%d", path, e.line)
		if e.key == FlagName || slices.Contains(skip, e.key) {
			return fmt.Errorf("%s: %q cannot be set in a recipe; give it on the command line", where, e.key)
		}
		f := fs.Lookup(e.key)
		if f == nil {
			return fmt.Errorf("%s: unknown key %q (%s has no --%s flag)", where, e.key, fs.Name(), e.key)
		}
		if f.Changed || text(f) == e.value {
			continue // the command line wins; a flag at this value already is left unset
		}
		if err := fs.Set(e.key, e.value); err != nil {
			return fmt.Errorf("%s: %s: %w", where, e.key, err)
		}
	}
	return nil
}

// entry is one key of a recipe.
type entry struct {
	key, value string
	line       int
}

// parse reads a flat YAML mapping of scalars and lists of scalars.
func parse(raw []byte, path string) ([]entry, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("recipe: %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("recipe: %s:%d: want a mapping of flag names to values", path, root.Line)
	}
	var out []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		key := strings.TrimLeft(k.Value, "-") // "lr", "--lr" and "-lr" name one flag
		if k.Kind != yaml.ScalarNode || key == "" {
			return nil, fmt.Errorf("recipe: %s: a key must be a flag name", where)
		}
		if first, ok := seen[key]; ok {
			return nil, fmt.Errorf("recipe: %s: %q set twice (first on line %d)", where, key, first)
		}
		seen[key] = k.Line
		if k.Value == BuildKey && v.Kind == yaml.MappingNode {
			continue // Save's record of the binary, not a flag
		}
		e := entry{key: key, line: k.Line}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				return nil, fmt.Errorf("recipe: %s: %q has no value", where, e.key)
			}
			e.value = v.Value
		case yaml.SequenceNode:
			parts := make([]string, len(v.Content))
			for j, x := range v.Content {
				if x.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("recipe: %s: %q: a list may hold only plain values", where, e.key)
				}
				parts[j] = x.Value
			}
			e.value = strings.Join(parts, ",")
		default:
			return nil, fmt.Errorf("recipe: %s: %q: want a value or a list of values, not a mapping", where, e.key)
		}
		out = append(out, e)
	}
	return out, nil
}

// Values returns the effective value of every flag of fs, as text, except
// the flags named in skip and deprecated spellings (whose value is their
// new spelling's).
func Values(fs *pflag.FlagSet, skip ...string) map[string]string {
	vals := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == FlagName || f.Name == "help" || f.Deprecated != "" || slices.Contains(skip, f.Name) {
			return
		}
		vals[f.Name] = text(f)
	})
	return vals
}

// text returns f's value as a recipe writes it: a list comma-separated.
func text(f *pflag.Flag) string {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return strings.Join(sv.GetSlice(), ",")
	}
	return f.Value.String()
}

// Save writes vals to path as a recipe (keys in order), atomically, and
// under BuildKey what the running binary was built from (buildinfo.Read).
func Save(path string, vals map[string]string) error {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	buf.WriteString("# The resolved configuration of this run: every flag's value. A resume\n# with other values is refused unless --force is given.\n")
	for _, k := range keys {
		v, err := yaml.Marshal(vals[k]) // quoted where YAML needs it
		if err != nil {
			return fmt.Errorf("recipe: %s: %w", path, err)
		}
		fmt.Fprintf(&buf, "%s: %s", k, v)
	}
	build, err := yaml.Marshal(map[string]buildinfo.Info{BuildKey: buildinfo.Read()})
	if err != nil {
		return fmt.Errorf("recipe: %s: %w", path, err)
	}
	buf.WriteString("# The binary that last started this run (train version); --config skips it.\n")
	buf.Write(build)
	return outfile.WriteFile(path, buf.Bytes(), 0o644)
}

// Load reads a configuration Save wrote.
func Load(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	entries, err := parse(raw, path)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	for _, e := range entries {
		vals[e.key] = e.value
	}
	return vals, nil
}

// Change is a key whose value differs between two configurations; a key
// absent from one has "" there and Missing set.
type Change struct {
	Key, Was, Now string
	Missing       bool
}

// String returns "key: was → now".
func (c Change) String() string {
	if c.Missing {
		return fmt.Sprintf("%s: %q → %q (absent from one)", c.Key, c.Was, c.Now)
	}
	return fmt.Sprintf("%s: %q → %q", c.Key, c.Was, c.Now)
}

// Diff returns the keys whose values differ between was and now, in key
// order, leaving out the keys in ignore.
func Diff(was, now map[string]string, ignore ...string) []Change {
	var keys []string
	for k := range was {
		keys = append(keys, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Change
	for _, k := range keys {
		if slices.Contains(ignore, k) {
			continue
		}
		w, inW := was[k]
		n, inN := now[k]
		if w != n || inW != inN {
			out = append(out, Change{Key: k, Was: w, Now: n, Missing: inW != inN})
		}
	}
	return out
}

// ErrChanged is what CheckRun wraps when a run directory was made with
// another configuration.
var ErrChanged = errors.New("the run directory was made with another configuration")

// CheckRun compares now with the configuration saved at path, if there is
// one, and then saves now there. A difference in a key not in ignore (the
// flags a resume may change: the step budget, threads, where logs go) is
// an error wrapping ErrChanged that names every such key, unless force is
// set, in which case the saved configuration is replaced.
func CheckRun(path string, now map[string]string, force bool, ignore ...string) error {
	if was, err := Load(path); err == nil {
		if ch := Diff(was, now, ignore...); len(ch) > 0 && !force {
			lines := make([]string, len(ch))
			for i, c := range ch {
				lines[i] = "  " + c.String()
			}
			return fmt.Errorf("%s: %w; resuming would mix them:\n%s\n(pass --force to resume anyway, or use another run directory)",
				path, ErrChanged, strings.Join(lines, "\n"))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return Save(path, now)
}
