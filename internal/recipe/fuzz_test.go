package recipe

import (
	"strings"
	"testing"
)

// FuzzParse feeds recipe bytes to the YAML recipe parser: entries or an
// error naming the file, never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"lr: 2e-5\nsteps: 100\nlora-targets: [q, k, v]\n", "--lr: 1\n", "a: {b: c}\n", "a:\n", "- x\n", "a: 1\na: 2\n",
		"turnwise: {version: v1}\nlr: 1\n", "&a [*a]", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		es, err := parse(raw, "r.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "r.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, e := range es {
			if e.key == "" {
				t.Errorf("an entry with no key: %+v", e)
			}
		}
	})
}
