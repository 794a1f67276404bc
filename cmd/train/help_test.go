package main

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// helpNames returns every subcommand with a help: the table's, bench
// report, bench profile and help.
func helpNames() []string {
	return append(slices.Sorted(maps.Keys(commands())), "bench report", "bench profile", "help")
}

// TestHelp checks that every subcommand's help, from train help X and from
// train X --help alike, has its usage line, a description, examples of
// itself, and its flags; and that train help refuses what is not a
// subcommand.
func TestHelp(t *testing.T) {
	hs := helps()
	for _, name := range helpNames() {
		t.Run(name, func(t *testing.T) {
			h, ok := hs[name]
			if !ok {
				t.Fatalf("no help for train %s", name)
			}
			var out, errOut bytes.Buffer
			if code := run(append([]string{"help"}, strings.Fields(name)...), strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("train help %s: exit status %d\n%s", name, code, errOut.String())
			}
			got := out.String()
			if !strings.HasPrefix(got, "usage: train "+name) {
				t.Errorf("train help %s begins %q", name, firstLine(got))
			}
			if len(strings.Fields(h.text)) < 8 {
				t.Errorf("train %s: the description %q is not a paragraph", name, h.text)
			}
			for _, want := range []string{h.text, "\nexamples:\n  # ", "\n  train " + name} {
				if !strings.Contains(got, want) {
					t.Errorf("train help %s lacks %q:\n%s", name, want, got)
				}
			}
			if name == "help" {
				return
			}
			if !strings.Contains(got, "\nflags:\n") || !strings.Contains(got, "--config") {
				t.Errorf("train help %s lists no flags:\n%s", name, got)
			}
			var again, stderr bytes.Buffer
			run(append(strings.Fields(name), "--help"), strings.NewReader(""), &again, &stderr)
			if stderr.String() != got {
				t.Errorf("train %s --help differs from train help %s:\n%s", name, name, stderr.String())
			}
		})
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "sft", "extra"}, {"help", "bench", "nope"}} {
		var out, errOut bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "no subcommand") {
			t.Errorf("train %s: exit status %d, stderr %q", strings.Join(args, " "), code, firstLine(errOut.String()))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestHelpExamples checks every example of every help as the README's
// commands are checked (checkInvocations): each names a subcommand, and
// each flag it gives is one its subcommand lists, with a valid value.
func TestHelpExamples(t *testing.T) {
	var invs []invocation
	for _, name := range helpNames() {
		for i, e := range helps()[name].examples {
			rest, ok := trainArgs(shellWords(e.line), 0)
			if !ok || len(rest) == 0 {
				t.Errorf("train %s: example %q is not a train command", name, e.line)
				continue
			}
			first := strings.Join(rest[:min(len(rest), len(strings.Fields(name)))], " ")
			if dash := slices.Index(rest, "--"); rest[0] == "launch" && dash >= 0 && dash+1 < len(rest) {
				first = rest[dash+1] // an example of a subcommand under train launch
				if name == "launch" {
					first = "launch"
				}
			}
			if first != name {
				t.Errorf("train %s's example %q is of another subcommand", name, e.line)
			}
			invs = append(invs, launched(i+1, rest)...)
		}
	}
	for _, p := range checkInvocations(invs) {
		t.Error(p)
	}
}

// TestFlagConsistency checks that a flag name means one kind of value in
// every subcommand: --json is a switch everywhere, --out and --preset take
// a name everywhere.
func TestFlagConsistency(t *testing.T) {
	cmds := commands()
	kinds := map[string]map[string][]string{} // flag → value type → subcommands
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		flags := subcommandFlags(cmds, name)
		if len(flags) == 0 {
			t.Errorf("train %s: no flags captured", name)
		}
		for _, f := range flags {
			if kinds[f.Name] == nil {
				kinds[f.Name] = map[string][]string{}
			}
			kind := f.Value.Type()
			switch kind {
			case "float32", "float64", "fraction":
				kind = "number"
			}
			kinds[f.Name][kind] = append(kinds[f.Name][kind], name)
			// A back-quoted word in a usage is the placeholder help prints
			// after the flag: a phrase quoted there reads as the value.
			if ph, _ := pflag.UnquoteUsage(f); strings.ContainsAny(ph, " \t") {
				t.Errorf("train %s --%s: its usage back-quotes %q, which help prints as the value's name", name, f.Name, ph)
			}
		}
	}
	for flag, byType := range kinds {
		if len(byType) > 1 {
			t.Errorf("--%s takes different values in different subcommands: %v", flag, byType)
		}
	}
	for flag, want := range map[string]string{"json": "bool", "out": "string", "preset": "string", "seed": "uint64", "temperature": "number", "top-p": "number", "top-k": "int"} {
		if _, ok := kinds[flag][want]; !ok {
			t.Errorf("--%s: %v, want %s", flag, kinds[flag], want)
		}
	}
	// Every subcommand that samples takes the sampling flags.
	for _, name := range []string{"generate", "eval", "rollout", "actor"} {
		for _, flag := range []string{"temperature", "top-p", "top-k", "seed"} {
			found := false
			for _, f := range subcommandFlags(cmds, name) {
				found = found || f.Name == flag
			}
			if !found {
				t.Errorf("train %s samples but has no --%s", name, flag)
			}
		}
	}
}

// TestCompletion loads each shell's completion script in that shell and
// asks it to complete a subcommand, a flag and a help topic.
func TestCompletion(t *testing.T) {
	script := func(shell string) string {
		var out, errOut bytes.Buffer
		if code := run([]string{"completion", shell}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("train completion %s: exit status %d: %s", shell, code, errOut.String())
		}
		for _, name := range slices.Sorted(maps.Keys(commands())) {
			if !strings.Contains(out.String(), name) {
				t.Errorf("the %s script lacks subcommand %s", shell, name)
			}
		}
		path := t.TempDir() + "/train." + shell
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if code := run([]string{"completion", "tcsh"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code == 0 {
		t.Error("train completion tcsh: exit status 0, want a refusal")
	}
	shell := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed (scripts/setup.sh installs it)", name)
		}
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	t.Run("bash", func(t *testing.T) {
		path := script("bash")
		complete := func(words ...string) []string {
			prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _train; printf '%s\n' "${COMPREPLY[@]}"`
			return strings.Fields(shell(t, "bash", append([]string{"-c", prog, "bash", path}, words...)...))
		}
		for _, tc := range []struct {
			words []string
			want  []string
		}{
			{[]string{"train", "gen"}, []string{"generate"}},
			{[]string{"train", "sft", "--lora-r"}, []string{"--lora-rank"}},
			{[]string{"train", "plot", "--o"}, []string{"--out"}},
			{[]string{"train", "help", "crit"}, []string{"critic", "critic-check"}},
			{[]string{"train", "completion", "z"}, []string{"zsh"}},
		} {
			if got := complete(tc.words...); !slices.Equal(got, tc.want) {
				t.Errorf("bash completes %q to %q, want %q", tc.words, got, tc.want)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		path := script("zsh")
		shell(t, "zsh", "-n", path)
		// Loaded after compinit, it registers itself for train.
		prog := `autoload -U compinit; compinit -u -d "$2"; source "$1"; print -r -- $_comps[train]`
		if got := strings.TrimSpace(shell(t, "zsh", "-f", "-c", prog, "zsh", path, t.TempDir()+"/zcompdump")); got != "_train" {
			t.Errorf("zsh completes train with %q, want _train", got)
		}
	})
	t.Run("fish", func(t *testing.T) {
		path := script("fish")
		complete := func(line string) []string {
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(shell(t, "fish", "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", path, line)), "\n") {
				word, _, _ := strings.Cut(l, "\t")
				got = append(got, word)
			}
			return got
		}
		for _, tc := range []struct {
			line string
			want []string
		}{
			{"train gen", []string{"generate"}},
			{"train sft --lora-r", []string{"--lora-rank"}},
			{"train completion f", []string{"fish"}},
		} {
			if got := complete(tc.line); !slices.Equal(got, tc.want) {
				t.Errorf("fish completes %q to %q, want %q", tc.line, got, tc.want)
			}
		}
	})
}
