package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// llama3Pattern is the pre-tokenizer regular expression of Llama 3. Go's
// regexp package has no lookahead, so nextPiece implements it by hand; the
// string is kept to recognise it in tokenizer.json files.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Character classes of the pattern.
const (
	clsOther   = iota // none of the below: punctuation, symbols, marks
	clsLetter         // \p{L}
	clsNumber         // \p{N}
	clsSpace          // \s other than CR and LF
	clsNewline        // CR or LF
)

// asciiClass holds the class of each ASCII byte.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range utf8.RuneSelf {
		t[c] = classOfRune(rune(c))
	}
	return t
}()

func classOfRune(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r): // the Unicode White_Space property, like \s
		return clsSpace
	}
	return clsOther
}

// classAt returns the class and the byte width of the character at s[i]. An
// invalid UTF-8 byte is a one-byte character of class clsOther.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError {
		return clsOther, w
	}
	return classOfRune(r), w
}

// nextPiece returns the end of the pre-token that starts at s[i], i < len(s).
// It follows the alternatives of llama3Pattern in order, as a backtracking
// regexp engine would:
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)   a contraction
//  2. [^\r\n\p{L}\p{N}]?\p{L}+       letters, with one leading non-letter
//  3. \p{N}{1,3}                     up to three digits
//  4. " ?[^\s\p{L}\p{N}]+[\r\n]*"    punctuation, then any line breaks
//  5. \s*[\r\n]+                     whitespace through its last line break
//  6. \s+(?!\S)                      whitespace but the last character
//     before non-whitespace
//  7. \s+                            whitespace
func nextPiece(s string, i int) int {
	cls, w := classAt(s, i)
	j := i + w
	switch cls {
	case clsLetter:
		return scanLetters(s, j)
	case clsNumber:
		for range 2 {
			if j >= len(s) {
				break
			}
			c, w := classAt(s, j)
			if c != clsNumber {
				break
			}
			j += w
		}
		return j
	case clsOther:
		if s[i] == '\'' {
			if n := contraction(s[j:]); n > 0 {
				return j + n
			}
		}
		if j < len(s) {
			if c, _ := classAt(s, j); c == clsLetter {
				return scanLetters(s, j)
			}
		}
		return scanNewlines(s, scanOthers(s, j))
	case clsSpace:
		if j < len(s) {
			c, _ := classAt(s, j)
			if c == clsLetter {
				return scanLetters(s, j)
			}
			if c == clsOther && s[i] == ' ' {
				return scanNewlines(s, scanOthers(s, j))
			}
		}
	}
	// Whitespace: alternatives 5 to 7.
	end, lastNL, lastStart := i, -1, i
	for end < len(s) {
		c, w := classAt(s, end)
		if c == clsNewline {
			lastNL = end
		} else if c != clsSpace {
			break
		}
		lastStart = end
		end += w
	}
	switch {
	case lastNL >= 0:
		return lastNL + 1
	case end == len(s) || lastStart == i:
		return end
	default:
		return lastStart
	}
}

// scanLetters returns the end of the run of letters starting at s[j].
func scanLetters(s string, j int) int {
	for j < len(s) {
		c, w := classAt(s, j)
		if c != clsLetter {
			break
		}
		j += w
	}
	return j
}

// scanOthers returns the end of the run of class-other characters starting
// at s[j].
func scanOthers(s string, j int) int {
	for j < len(s) {
		c, w := classAt(s, j)
		if c != clsOther {
			break
		}
		j += w
	}
	return j
}

// scanNewlines returns the end of the run of CR and LF starting at s[j].
func scanNewlines(s string, j int) int {
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// contraction returns the length of the contraction suffix (s, t, re, ve,
// m, ll or d, in any case) at the start of s, or 0.
func contraction(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && s[1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && s[1]|0x20 == 'l' {
			return 2
		}
	}
	// Case-insensitive matching folds U+017F LATIN SMALL LETTER LONG S
	// to s.
	if len(s) > 1 && s[0] == 0xC5 && s[1] == 0xBF {
		return 2
	}
	return 0
}
