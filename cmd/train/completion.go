package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// flagCapture is the stderr a subcommand is run with, with --help, to learn
// its flags: newFlags records its flag set here; what is written is dropped.
type flagCapture struct{ fs *pflag.FlagSet }

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// subcommandFlags returns the flags of subcommand name, in their order of
// definition, hidden and deprecated ones left out.
func subcommandFlags(cmds map[string]command, name string) []*pflag.Flag {
	var c flagCapture
	_ = cmds[name].run([]string{"--help"}, strings.NewReader(""), io.Discard, &c)
	if c.fs == nil {
		return nil
	}
	var out []*pflag.Flag
	c.fs.SortFlags = false
	c.fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			out = append(out, f)
		}
	})
	return out
}

// runCompletion implements "train completion SHELL".
func runCompletion(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("completion", stderr)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one shell, bash, zsh or fish; got %q", fs.Args())
	}
	cmds := commands()
	var subs []completionEntry
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		subs = append(subs, completionEntry{name: name, desc: cmds[name].summary, flags: subcommandFlags(cmds, name)})
	}
	subs = append(subs, completionEntry{name: "help", desc: "print a subcommand's help: its description, examples and flags"})
	switch fs.Arg(0) {
	case "bash":
		writeBash(stdout, subs)
	case "zsh":
		writeZsh(stdout, subs)
	case "fish":
		writeFish(stdout, subs)
	default:
		return fmt.Errorf("shell %q: want bash, zsh or fish", fs.Arg(0))
	}
	return nil
}

// completionEntry is a subcommand as a completion script offers it.
type completionEntry struct {
	name, desc string
	flags      []*pflag.Flag
}

// takesValue reports whether a flag needs a value (booleans do not).
func takesValue(f *pflag.Flag) bool { return f.NoOptDefVal == "" }

// choices returns the words a subcommand's plain arguments complete to:
// subcommands for help, shells for completion, none elsewhere (files).
func choices(name string, subs []completionEntry) []string {
	switch name {
	case "help":
		var out []string
		for _, s := range subs {
			out = append(out, s.name)
		}
		return out
	case "completion":
		return []string{"bash", "zsh", "fish"}
	}
	return nil
}

func writeBash(w io.Writer, subs []completionEntry) {
	var names []string
	for _, s := range subs {
		names = append(names, s.name)
	}
	fmt.Fprintf(w, `# bash completion for train; load with: source <(train completion bash)
_train() {
	local cur=${COMP_WORDS[COMP_CWORD]} words=""
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, s := range subs {
		var fl []string
		for _, f := range s.flags {
			fl = append(fl, "--"+f.Name)
			if f.Shorthand != "" {
				fl = append(fl, "-"+f.Shorthand)
			}
		}
		plain := strings.Join(choices(s.name, subs), " ")
		fmt.Fprintf(w, "\t%s)\n\t\tif [[ $cur == -* ]]; then words=%q; else words=%q; fi ;;\n", s.name, strings.Join(fl, " "), plain)
	}
	fmt.Fprint(w, `	esac
	[ -n "$words" ] && COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _train train
`)
}

// zshQuote escapes a description for _arguments' and _describe's specs.
func zshQuote(s string) string {
	r := strings.NewReplacer(`'`, `'\''`, `[`, `(`, `]`, `)`, `:`, `\:`)
	return r.Replace(firstSentence(s))
}

// firstSentence shortens a flag's usage to its first clause, for the
// scripts' one-line descriptions.
func firstSentence(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if i := strings.IndexAny(s, ";("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func writeZsh(w io.Writer, subs []completionEntry) {
	fmt.Fprint(w, `#compdef train
# zsh completion for train; save as _train on $fpath, or: source <(train completion zsh)
_train() {
	local -a subs
	subs=(
`)
	for _, s := range subs {
		fmt.Fprintf(w, "\t\t'%s:%s'\n", s.name, zshQuote(s.desc))
	}
	fmt.Fprint(w, `	)
	if (( CURRENT == 2 )); then
		_describe 'subcommand' subs
		return
	fi
	case $words[2] in
`)
	for _, s := range subs {
		fmt.Fprintf(w, "\t%s)\n\t\t_arguments -s \\\n", s.name)
		for _, f := range s.flags {
			val := ""
			if takesValue(f) {
				val = ":" + f.Name + ":_files"
			}
			if f.Shorthand != "" {
				fmt.Fprintf(w, "\t\t\t'(-%s --%s)'{-%s,--%s}'[%s]%s' \\\n", f.Shorthand, f.Name, f.Shorthand, f.Name, zshQuote(f.Usage), val)
			} else {
				fmt.Fprintf(w, "\t\t\t'--%s[%s]%s' \\\n", f.Name, zshQuote(f.Usage), val)
			}
		}
		if cs := choices(s.name, subs); len(cs) > 0 {
			fmt.Fprintf(w, "\t\t\t'1:argument:(%s)'\n\t\t;;\n", strings.Join(cs, " "))
		} else {
			fmt.Fprint(w, "\t\t\t'*:file:_files'\n\t\t;;\n")
		}
	}
	fmt.Fprint(w, `	esac
}
if [ "$funcstack[1]" = "_train" ]; then
	_train "$@"
else
	compdef _train train
fi
`)
}

// fishQuote quotes a description for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(firstSentence(s)) + "'"
}

func writeFish(w io.Writer, subs []completionEntry) {
	fmt.Fprintln(w, "# fish completion for train; save as ~/.config/fish/completions/train.fish, or: train completion fish | source")
	fmt.Fprintln(w, "complete -c train -e")
	for _, s := range subs {
		fmt.Fprintf(w, "complete -c train -f -n '__fish_use_subcommand' -a %s -d %s\n", s.name, fishQuote(s.desc))
	}
	for _, s := range subs {
		cond := fmt.Sprintf("'__fish_seen_subcommand_from %s'", s.name)
		for _, f := range s.flags {
			line := fmt.Sprintf("complete -c train -n %s -l %s", cond, f.Name)
			if f.Shorthand != "" {
				line += " -s " + f.Shorthand
			}
			if takesValue(f) {
				line += " -r"
			}
			fmt.Fprintf(w, "%s -d %s\n", line, fishQuote(f.Usage))
		}
		if cs := choices(s.name, subs); len(cs) > 0 {
			fmt.Fprintf(w, "complete -c train -f -n %s -a %q\n", cond, strings.Join(cs, " "))
		}
	}
}
