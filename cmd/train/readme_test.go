package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/internal/flagcheck"
)

// invocation is one "train <subcommand> <args>" command a document names:
// the words after "train", and the document line it starts on.
type invocation struct {
	line int
	args []string
}

func (inv invocation) String() string {
	return fmt.Sprintf("line %d: train %s", inv.line, strings.Join(inv.args, " "))
}

// shellFence matches the opening of a fenced code block of shell commands;
// other fences (file trees, tables of output, Go) hold no commands.
var shellFence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*(sh|bash|shell|console|zsh)\\s*$")

// fence matches any fence line.
var fence = regexp.MustCompile("^\\s*(```+|~~~+)")

// readmeInvocations returns the train commands of a markdown document: the
// lines of its shell code blocks (backslash continuations joined, comments
// dropped), where train is the program of a command or is started by
// another (go run ./cmd/train, torchrun --no_python train, srun train),
// and the inline code spans outside code blocks that begin with train or
// go run ./cmd/train. The subcommand that train launch starts after "--"
// is an invocation of its own.
func readmeInvocations(doc string) []invocation {
	var out []invocation
	lines := strings.Split(doc, "\n")
	var prose []string // lines outside code blocks, blank in their place
	inFence, shell := false, false
	var open string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case !inFence:
				inFence, open = true, m[1]
				shell = shellFence.MatchString(l)
				prose = append(prose, "")
				continue
			case strings.HasPrefix(m[1], open) && strings.TrimSpace(l) == m[1]:
				inFence = false
				prose = append(prose, "")
				continue
			}
		}
		if !inFence {
			prose = append(prose, l)
			continue
		}
		prose = append(prose, "")
		if !shell {
			continue
		}
		start := i + 1
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			prose = append(prose, "")
			l = strings.TrimSuffix(l, "\\") + " " + lines[i]
		}
		out = append(out, shellInvocations(start, l)...)
	}
	for _, sp := range codeSpans(prose) {
		words := shellWords(sp.text)
		if len(words) == 0 {
			continue
		}
		if rest, ok := trainArgs(words, 0); ok {
			out = append(out, launched(sp.line, rest)...)
		}
	}
	slices.SortStableFunc(out, func(a, b invocation) int { return a.line - b.line })
	return out
}

// shellInvocations returns the train commands of one shell line.
func shellInvocations(line int, text string) []invocation {
	var out []invocation
	words := shellWords(text)
	for len(words) > 0 {
		end := slices.IndexFunc(words, func(w string) bool { return w == "|" || w == "||" || w == "&&" || w == ";" || w == "&" })
		if end < 0 {
			end = len(words)
		}
		cmd := words[:end]
		words = words[min(end+1, len(words)):]
		if len(cmd) > 0 && cmd[0] == "make" {
			continue
		}
		for at := range cmd {
			if rest, ok := trainArgs(cmd, at); ok {
				out = append(out, launched(line, rest)...)
				break
			}
		}
	}
	return out
}

// trainArgs reports whether words[at] starts a train command (train,
// ./train, or go run of cmd/train) and returns the words after it.
func trainArgs(words []string, at int) ([]string, bool) {
	w := words[at]
	switch {
	case w == "train" || w == "./train":
		return words[at+1:], true
	case w == "go" && at+2 < len(words) && words[at+1] == "run" && strings.HasSuffix(strings.TrimSuffix(words[at+2], "/"), "cmd/train"):
		return words[at+3:], true
	}
	return nil, false
}

// launched splits "launch <flags> -- <subcommand> <flags>" into its two
// invocations; any other command is one.
func launched(line int, args []string) []invocation {
	if len(args) == 0 {
		return nil
	}
	if args[0] == "launch" {
		if dash := slices.Index(args, "--"); dash >= 0 {
			return append([]invocation{{line, args[:dash]}}, launched(line, args[dash+1:])...)
		}
	}
	return []invocation{{line, args}}
}

// shellWords splits a shell line into words: quotes group (and are
// removed), a "#" that starts a word starts a comment.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// span is an inline code span and the line it starts on.
type span struct {
	line int
	text string
}

// codeSpans returns the inline code spans of markdown lines: text between
// matching runs of backticks, which may run over line breaks within a
// paragraph (a blank line ends an unclosed one).
func codeSpans(lines []string) []span {
	var out []span
	forParagraphs(lines, func(i int, para string) {
		for _, c := range paragraphSpans(para) {
			out = append(out, span{i + 1 + strings.Count(para[:c.open], "\n"), strings.ReplaceAll(para[c.from:c.to], "\n", " ")})
		}
	})
	return out
}

// forParagraphs calls fn with each paragraph of lines (a run of non-blank
// lines, joined by newlines) and the index of its first line.
func forParagraphs(lines []string, fn func(first int, para string)) {
	for i := 0; i < len(lines); i++ {
		j := i
		for j < len(lines) && strings.TrimSpace(lines[j]) != "" {
			j++
		}
		if j > i {
			fn(i, strings.Join(lines[i:j], "\n"))
		}
		i = j
	}
}

// spanAt is an inline code span of a paragraph, as byte offsets: its
// opening backticks start at open, its text is [from, to), its closing
// backticks end at close.
type spanAt struct{ open, from, to, close int }

// paragraphSpans returns the inline code spans of a paragraph: a run of
// backticks opens one, the next run of the same length closes it, and an
// opening run that is never closed is plain text.
func paragraphSpans(para string) []spanAt {
	var out []spanAt
	for pos := 0; pos < len(para); {
		k := strings.IndexByte(para[pos:], '`')
		if k < 0 {
			break
		}
		k += pos
		n := k
		for n < len(para) && para[n] == '`' {
			n++
		}
		ticks := para[k:n]
		end := -1
		for m := n; m < len(para); {
			e := strings.Index(para[m:], ticks)
			if e < 0 {
				break
			}
			e += m
			f := e + len(ticks)
			if f < len(para) && para[f] == '`' { // a longer run
				for f < len(para) && para[f] == '`' {
					f++
				}
				m = f
				continue
			}
			end = e
			break
		}
		if end < 0 {
			pos = n
			continue
		}
		out = append(out, spanAt{k, n, end, end + len(ticks)})
		pos = end + len(ticks)
	}
	return out
}

// flagSet is what a subcommand's --help lists: its flags' long names
// (true for those that take the next word as their value) and shorthands
// (the long name each stands for).
type flagSet struct {
	long  map[string]bool
	short map[string]string
}

// listedFlags runs "train <cmd...> --help" and returns the flags it lists.
func listedFlags(cmd []string) (flagSet, error) {
	var out, errOut bytes.Buffer
	if code := run(append(slices.Clone(cmd), "--help"), strings.NewReader(""), &out, &errOut); code != 0 {
		return flagSet{}, fmt.Errorf("train %s --help: exit status %d: %s", strings.Join(cmd, " "), code, strings.TrimSpace(errOut.String()))
	}
	fs := flagSet{map[string]bool{}, map[string]string{}}
	for _, line := range strings.Split(out.String()+errOut.String(), "\n") {
		// pflag's lines: "  -o, --output string   usage" or "      --name   usage";
		// the type word is there when the flag takes a value, with
		// [="..."] when the value must be joined to it with "=".
		head, _, _ := strings.Cut(strings.TrimSpace(line), "   ")
		f := strings.Fields(head)
		if len(f) > 1 && len(f[0]) == 3 && f[0][0] == '-' && f[0][2] == ',' && strings.HasPrefix(f[1], "--") {
			fs.short[f[0][1:2]] = strings.TrimPrefix(f[1], "--")
			f = f[1:]
		}
		if len(f) > 0 && strings.HasPrefix(f[0], "--") {
			fs.long[strings.TrimPrefix(f[0], "--")] = len(f) > 1 && !strings.Contains(f[1], "[=")
		}
	}
	if len(fs.long) == 0 {
		return flagSet{}, fmt.Errorf("train %s --help lists no flags", strings.Join(cmd, " "))
	}
	return fs, nil
}

// unlisted explains why cmd's --help does not list --name: the flag set
// has no such flag, or it is a deprecated spelling (which --help hides).
// It parses "--name=" followed by --help, which stops every subcommand
// before it does anything.
func unlisted(cmd []string, name string) string {
	var out, errOut bytes.Buffer
	c := commands()[cmd[0]]
	err := c.run(append(slices.Clone(cmd[1:]), "--"+name+"=", "--help"), strings.NewReader(""), &out, &errOut)
	if err != nil && strings.Contains(err.Error(), "unknown flag") {
		return fmt.Sprintf("train %s has no --%s", strings.Join(cmd, " "), name)
	}
	if err != nil && !errors.Is(err, pflag.ErrHelp) && !strings.Contains(err.Error(), "invalid argument") {
		return fmt.Sprintf("train %s --%s=: %v", strings.Join(cmd, " "), name, err)
	}
	msg := fmt.Sprintf("--%s is a deprecated spelling (train %s --help hides it)", name, strings.Join(cmd, " "))
	if notice := strings.TrimSpace(errOut.String()); strings.Contains(notice, "deprecated") {
		msg += ": " + strings.SplitN(notice, "\n", 2)[0]
	}
	return msg
}

// placeholder reports whether a flag's value in a document stands for
// values rather than being one: a name in capitals (MODEL, N, FILE.md),
// alternatives (hf|gguf) or an ellipsis.
func placeholder(val string) bool {
	return val == "" || val[0] >= 'A' && val[0] <= 'Z' || strings.ContainsAny(val, "|…<>") || strings.Contains(val, "...")
}

// badValue returns a problem if cmd's flag name refuses val, or takes it
// only for old scripts (a whole number of warm-up steps where --warmup is
// a fraction). It parses "--name=val" followed by --help, which stops
// every subcommand before it does anything.
func badValue(cmd []string, name, val string) string {
	c := commands()[cmd[0]]
	var out, errOut bytes.Buffer
	if err := c.run(append(slices.Clone(cmd[1:]), "--"+name+"="+val, "--help"), strings.NewReader(""), &out, &errOut); !errors.Is(err, pflag.ErrHelp) {
		return fmt.Sprintf("train %s --%s %s: %v", strings.Join(cmd, " "), name, val, err)
	}
	if name == "warmup" {
		w := flagcheck.NewWarmup(0)
		if w.Set(val) == nil {
			if _, notice := w.Steps(1); notice != "" {
				return notice
			}
		}
	}
	return ""
}

// checkInvocations returns a problem for each invocation whose subcommand
// does not exist, that names a flag its subcommand's --help does not list
// (an unknown flag or a deprecated spelling), or that gives a flag a value
// (not a placeholder) its flag set refuses or takes only for old scripts.
func checkInvocations(invs []invocation) []string {
	cmds := commands()
	listed := map[string]flagSet{}
	var problems []string
	for _, inv := range invs {
		sub := inv.args[0]
		if strings.HasPrefix(sub, "<") || sub == "help" || strings.HasPrefix(sub, "-") {
			continue // a placeholder (train <subcommand> --help), or train's own help
		}
		if _, ok := cmds[sub]; !ok {
			problems = append(problems, fmt.Sprintf("%s: no subcommand %q", inv, sub))
			continue
		}
		cmd, args := inv.args[:1], inv.args[1:]
		if sub == "bench" && len(args) > 0 && (args[0] == "report" || args[0] == "profile") {
			cmd, args = inv.args[:2], inv.args[2:]
		}
		key := strings.Join(cmd, " ")
		fs, ok := listed[key]
		if !ok {
			var err error
			if fs, err = listedFlags(cmd); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", inv, err))
				continue
			}
			listed[key] = fs
		}
		for i := 0; i < len(args); i++ {
			a := strings.Trim(args[i], "[]()")
			if a == "--" {
				break // what follows is not flags
			}
			if a == "--help" || a == "-h" {
				continue // every subcommand's
			}
			var name, val string
			var hasVal bool
			switch {
			case strings.HasPrefix(a, "--") && len(a) > 2:
				name, val, hasVal = strings.Cut(a[2:], "=")
				if _, ok := fs.long[name]; !ok {
					problems = append(problems, fmt.Sprintf("%s: %s", inv, unlisted(cmd, name)))
					continue
				}
			case len(a) >= 2 && a[0] == '-' && (a[1] >= 'a' && a[1] <= 'z' || a[1] >= 'A' && a[1] <= 'Z'):
				if name = fs.short[a[1:2]]; name == "" {
					problems = append(problems, fmt.Sprintf("%s: train %s has no shorthand -%s", inv, key, a[1:2]))
					continue
				}
				val, hasVal = a[2:], len(a) > 2
			default:
				continue // a value or an argument
			}
			if !hasVal && fs.long[name] && i+1 < len(args) {
				i++
				val, hasVal = strings.Trim(args[i], "[]()"), true
			}
			if !hasVal || placeholder(val) {
				continue
			}
			if p := badValue(cmd, name, val); p != "" {
				problems = append(problems, fmt.Sprintf("%s: %s", inv, p))
			}
		}
	}
	return problems
}

// TestReadmeInvocations checks the extraction of train commands from
// markdown, and that checkInvocations flags a subcommand or flag that does
// not exist and a deprecated spelling.
func TestReadmeInvocations(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		want     []string // invocation.String()
		problems []string // a substring of each problem, in order
	}{
		{
			name: "shell block",
			doc:  "Run:\n\n```sh\ngo run ./cmd/train sft --out runs/x --lora-rank 16   # a comment --bogus\ntrain eval --hf MODEL \\\n  --json\nmake run   # train demo --nope\n```\n",
			want: []string{"line 4: train sft --out runs/x --lora-rank 16", "line 5: train eval --hf MODEL --json"},
		},
		{
			name: "launch and pipes",
			doc:  "```bash\ntrain launch --nproc-per-node 2 -- sft --threads 1\necho '{\"text\": \"a | b\"}' | train score --hf DIR\nsrun --nodes 2 train collectives --backend cuda\n```\n",
			want: []string{"line 2: train launch --nproc-per-node 2", "line 2: train sft --threads 1", "line 3: train score --hf DIR", "line 4: train collectives --backend cuda"},
		},
		{
			name: "inline spans",
			doc:  "`train export --from M [--adapter A] --out OUT --format hf|gguf [--dtype\nf16]` and `train <subcommand> --help`, ``train plot -y loss``;\n`cmd/train → sweetrl`, `make run`.\n\n`train bench report --out FILE.md A.json`\n",
			want: []string{"line 1: train export --from M [--adapter A] --out OUT --format hf|gguf [--dtype f16]", "line 2: train <subcommand> --help",
				"line 2: train plot -y loss", "line 5: train bench report --out FILE.md A.json"},
		},
		{
			name: "other fences hold no commands",
			doc:  "```\ncmd/train/   the CLI (train help)\nlr train loss\n```\n```go\ntrain sft --bogus\n```\n",
		},
		{
			name: "bad commands",
			doc:  "```sh\ntrain sft --run-dir runs/x --no-such-flag 1\ntrain nosuch --out x\ntrain launch --nproc-per-node 2 -- critic --bogus-flag\ntrain plot m.jsonl -q x\ntrain critic --warmup 0.1 --out c\ntrain sft --warmup=20 --steps ten --lora-rank R --recompute runs/x\ntrain plot -o out.svg -ylr,loss m.jsonl\n```\n`train bench report --md X`\n",
			want: []string{"line 2: train sft --run-dir runs/x --no-such-flag 1", "line 3: train nosuch --out x", "line 4: train launch --nproc-per-node 2",
				"line 4: train critic --bogus-flag", "line 5: train plot m.jsonl -q x",
				"line 6: train critic --warmup 0.1 --out c", "line 7: train sft --warmup=20 --steps ten --lora-rank R --recompute runs/x",
				"line 8: train plot -o out.svg -ylr,loss m.jsonl", "line 10: train bench report --md X"},
			problems: []string{"--run-dir is a deprecated spelling", "train sft has no --no-such-flag", `no subcommand "nosuch"`,
				"train critic has no --bogus-flag", "train plot has no shorthand -q",
				"--warmup 20: a count of steps is deprecated", `train sft --steps ten: invalid argument "ten"`, "train bench report has no --md"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			invs := readmeInvocations(tc.doc)
			var got []string
			for _, inv := range invs {
				got = append(got, inv.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("invocations:\n got %q\nwant %q", got, tc.want)
			}
			problems := checkInvocations(invs)
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d matching %q", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				if !strings.Contains(p, tc.problems[i]) {
					t.Errorf("problem %d: %q, want it to say %q", i, p, tc.problems[i])
				}
			}
		})
	}
}
