package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/turnwise/turnwise/"

// rules: packages under each prefix may not import (directly or not) any
// package under the listed prefixes.
var rules = []struct {
	pkg    string
	forbid []string
}{
	{"internal/", []string{"model/", "sweetrl/", "trainer", "cmd/", "bench", "engine/cpu", "engine/cuda"}},
	{"tokenizer", []string{"engine", "model/", "sweetrl/", "trainer", "cmd/", "bench"}},
	{"engine", []string{"model/", "sweetrl/", "trainer", "optim", "cmd/", "bench", "tokenizer"}},
	{"model/", []string{"engine/cpu", "engine/cuda", "sweetrl/", "trainer", "cmd/", "bench"}},
	{"optim", []string{"engine/cpu", "engine/cuda", "model/", "sweetrl/", "cmd/", "bench"}},
}

func TestImportDirections(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps=false", "-json", module+"...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v (the go command is needed to read the imports)", err)
	}
	type pkg struct {
		ImportPath string
		Deps       []string
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, r := range rules {
			if !strings.HasPrefix(rel, r.pkg) {
				continue
			}
			for _, d := range p.Deps {
				drel, ours := strings.CutPrefix(d, module)
				if !ours {
					continue
				}
				for _, f := range r.forbid {
					if strings.HasPrefix(drel, f) {
						t.Errorf("%s imports %s (directly or through another package): %s may not import %s", rel, drel, r.pkg, f)
					}
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list named %d packages: the test did not see the repository", n)
	}
}
