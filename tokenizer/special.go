package tokenizer

import (
	"fmt"
	"sort"
)

// Names of the Llama 3 special tokens the package relies on.
const (
	BeginOfText   = "<|begin_of_text|>"
	EndOfText     = "<|end_of_text|>"
	StartHeaderID = "<|start_header_id|>"
	EndHeaderID   = "<|end_header_id|>"
	EOMID         = "<|eom_id|>"
	EOTID         = "<|eot_id|>"
	PythonTag     = "<|python_tag|>"
)

// Llama3NumSpecial is the number of special tokens Llama 3 appends after its
// ordinary vocabulary.
const Llama3NumSpecial = 256

// llama31Named lists the Llama 3.1 special tokens that have names, by offset
// from the first special id; every other offset k is
// <|reserved_special_token_N|>, numbered in order from N = 0.
var llama31Named = map[int]string{
	0:  BeginOfText,
	1:  EndOfText,
	4:  "<|finetune_right_pad_id|>",
	6:  StartHeaderID,
	7:  EndHeaderID,
	8:  EOMID,
	9:  EOTID,
	10: PythonTag,
}

// Llama31SpecialTokens returns the names of the 256 Llama 3.1 special
// tokens, in id order: the first has id equal to the size of the ordinary
// vocabulary (128000 for Llama 3).
func Llama31SpecialTokens() []string {
	names := make([]string, Llama3NumSpecial)
	reserved := 0
	for k := range names {
		if n, ok := llama31Named[k]; ok {
			names[k] = n
			continue
		}
		names[k] = fmt.Sprintf("<|reserved_special_token_%d|>", reserved)
		reserved++
	}
	return names
}

// specialSet finds special-token text in a string.
type specialSet struct {
	ids   map[string]int32
	lens  []int     // distinct token lengths, longest first
	first [256]bool // bytes that start some token
}

func newSpecialSet(ids map[string]int32) specialSet {
	s := specialSet{ids: ids}
	seen := map[int]bool{}
	for text := range ids {
		s.first[text[0]] = true
		if !seen[len(text)] {
			seen[len(text)] = true
			s.lens = append(s.lens, len(text))
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(s.lens)))
	return s
}

// find returns the position, id and length of the leftmost special token
// in text, preferring the longest at a position, or pos -1.
func (s *specialSet) find(text string) (pos int, id int32, n int) {
	if len(s.ids) == 0 {
		return -1, 0, 0
	}
	for i := 0; i < len(text); i++ {
		if !s.first[text[i]] {
			continue
		}
		for _, l := range s.lens {
			if i+l > len(text) {
				continue
			}
			if id, ok := s.ids[text[i:i+l]]; ok {
				return i, id, l
			}
		}
	}
	return -1, 0, 0
}
