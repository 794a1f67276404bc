package tokenizer

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// split returns the pre-tokens of s.
func split(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := nextPiece(s, i)
		if j <= i || j > len(s) {
			panic("nextPiece made no progress")
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"I've 'told he's there, 'RE you sure? 'Ll", []string{"I", "'ve", " '", "told", " he", "'s", " there", ",", " '", "RE", " you", " sure", "?", " '", "Ll"}},
		{"'ſ 'x '", []string{"'ſ", " '", "x", " '"}},
		{"1234567 x12", []string{"123", "456", "7", " x", "12"}},
		{"ied 4 ½ months", []string{"ied", " ", "4", " ", "½", " months"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a   \n\n  b", []string{"a", "   \n\n", " ", " b"}},
		{"a \n \n b", []string{"a", " \n \n", " b"}},
		{"end   ", []string{"end", "   "}},
		{"\t\tx", []string{"\t", "\tx"}},
		{" ", []string{" "}},
		{"x !!!\n\ny", []string{"x", " !!!\n\n", "y"}},
		{"x \t!", []string{"x", " ", "\t", "!"}},
		{"...abc", []string{"...", "abc"}},
		{"(x", []string{"(x"}},
		{"\u00a0word\u3000日本", []string{"\u00a0word", "\u3000日本"}},
		{"\r\nx", []string{"\r\n", "x"}},
		{"a\xffb\xfe", []string{"a", "\xffb", "\xfe"}},
		{"ក្រុង", []string{"ក", "្រ", "ុង"}},
	}
	for _, tt := range tests {
		if got := split(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("split(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := refSplit(tt.in); !reflect.DeepEqual(got, tt.want) && utf8.ValidString(tt.in) {
			t.Errorf("reference split(%q) = %q, want %q (the table is wrong)", tt.in, got, tt.want)
		}
	}
}

// The reference splitter runs the alternatives of the Llama 3 pattern, in
// order, with Go's regexp, which picks what a backtracking engine would
// within each alternative. \s is spelled out as the White_Space property,
// and the lookahead of alternative 6 is done by hand.
const ws = `\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var refAlts = []*regexp.Regexp{
	regexp.MustCompile(`^(?i:'s|'t|'re|'ve|'m|'ll|'d)`),
	regexp.MustCompile(`^[^\r\n\p{L}\p{N}]?\p{L}+`),
	regexp.MustCompile(`^\p{N}{1,3}`),
	regexp.MustCompile(`^ ?[^` + ws + `\p{L}\p{N}]+[\r\n]*`),
	regexp.MustCompile(`^[` + ws + `]*[\r\n]+`),
	nil, // \s+(?!\S)
	regexp.MustCompile(`^[` + ws + `]+`),
}

var refSpaces = regexp.MustCompile(`^[` + ws + `]+`)

func refSplit(s string) []string {
	var out []string
	for s != "" {
		n := 0
		for _, re := range refAlts {
			if re == nil {
				// \s+(?!\S): the longest run of whitespace not followed by
				// a non-whitespace character.
				m := refSpaces.FindString(s)
				for m != "" {
					rest := s[len(m):]
					if rest == "" || refSpaces.MatchString(rest) {
						break
					}
					_, w := utf8.DecodeLastRuneInString(m)
					m = m[:len(m)-w]
				}
				n = len(m)
			} else {
				n = len(re.FindString(s))
			}
			if n > 0 {
				break
			}
		}
		if n == 0 {
			panic("reference splitter: no alternative matches " + s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// FuzzSplit compares the hand-written pre-tokenizer with the regexp-based
// reference on valid UTF-8, and checks that it covers any input exactly.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"Hello world", " \n\n \t x", "I'LL 'd 'Ve", "3.14159 x=42;", "   \u3000\u2028ab", "\u00a0\u0085\v\f",
		"<|eot_id|>", "¿Qué tal?\r\n", "🦙🦙 llama", "a\xff\xfe b", "ǅungla Ⅻ ①②③④",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := split(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not join to %q", got, s)
		}
		if !utf8.ValidString(s) {
			return
		}
		if want := refSplit(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("split(%q) = %q, reference %q", s, got, want)
		}
	})
}
