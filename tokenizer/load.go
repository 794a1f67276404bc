package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// Load reads a Llama 3 tokenizer from path, which may be a Hugging Face
// tokenizer.json or a tiktoken-format tokenizer.model; the format is told
// from the content.
func Load(path string) (*BPE, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return parseJSON(path, data)
	}
	return parseTiktoken(path, bytes.NewReader(data))
}

// LoadJSON reads a Hugging Face tokenizer.json file holding a Llama 3
// tokenizer.
func LoadJSON(path string) (*BPE, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return parseJSON(path, data)
}

// ParseJSON parses the content of a Hugging Face tokenizer.json holding a
// Llama 3 tokenizer: a byte-level BPE model with the Llama 3 pre-tokenizer
// pattern. Other tokenizers are rejected with an error saying what differs,
// since the pre-tokenizer is implemented for that pattern only.
//
// Special-token names are those of the file: Llama 3.0 files name id 128008
// <|reserved_special_token_4|> where 3.1 files say <|eom_id|>; it is an
// end-of-sequence id either way.
func ParseJSON(data []byte) (*BPE, error) {
	return parseJSON("tokenizer.json", data)
}

// LoadTiktoken reads Meta's tokenizer.model file for Llama 3: one line per
// token, its bytes in base64 and its rank, which is also its id. The 256
// special tokens are not in the file; they are added after the ordinary
// tokens with their Llama 3.1 names (see Llama31SpecialTokens).
func LoadTiktoken(path string) (*BPE, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer fd.Close()
	return parseTiktoken(path, fd)
}

// ParseTiktoken reads a tokenizer.model in tiktoken format from r; see
// LoadTiktoken.
func ParseTiktoken(r io.Reader) (*BPE, error) {
	return parseTiktoken("tokenizer.model", r)
}

// NewByteLevelBPE builds a Llama 3 tokenizer from the arrays a GGUF file
// stores (tokenizer.ggml.tokens, .token_type and .merges, with
// tokenizer.ggml.model "gpt2"). Tokens of type TokenControl are special
// tokens, matched only with AllowSpecial; TokenUserDefined tokens are
// matched in all text; the others are ordinary tokens spelled in the
// byte-to-character mapping of byte-level BPE. Merges are "left right" in the
// same spelling, lowest rank first. The text is split with the Llama 3
// pre-tokenizer ("llama-bpe" in GGUF terms), which callers must check the
// file asks for.
func NewByteLevelBPE(tokens []string, types []int32, merges []string) (*BPE, error) {
	const what = "GGUF vocabulary"
	if len(types) != len(tokens) {
		return nil, fmt.Errorf("tokenizer: %s: %d token types for %d tokens", what, len(types), len(tokens))
	}
	raw := make([]string, len(tokens))
	kinds := make([]tokenKind, len(tokens))
	spelled := make(map[string]int32, len(tokens))
	for id, tok := range tokens {
		switch TokenType(types[id]) {
		case TokenControl:
			raw[id], kinds[id] = tok, kindSpecial
			continue
		case TokenUserDefined:
			raw[id], kinds[id] = tok, kindAdded
			continue
		}
		b, ok := fromByteLevel(tok)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: token %d (%q) is not in byte-level spelling", what, id, tok)
		}
		raw[id] = b
		spelled[tok] = int32(id)
	}
	pairs := make([][2]string, len(merges))
	for i, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: merge %d (%q) is not two tokens separated by a space", what, i, m)
		}
		pairs[i] = [2]string{a, b}
	}
	table, err := mergeTable(spelled, pairs)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", what, err)
	}
	return newBPE(what, raw, kinds, table, true)
}

// hfFile is the part of tokenizer.json that matters here.
type hfFile struct {
	AddedTokens  []hfAdded       `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer *hfPre          `json:"pre_tokenizer"`
	Decoder      *hfPre          `json:"decoder"`
	Model        *struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int64 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		ByteFallback            bool             `json:"byte_fallback"`
		ContinuingSubwordPrefix string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         string           `json:"end_of_word_suffix"`
	} `json:"model"`
}

type hfAdded struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
}

// hfPre is a pre-tokenizer or decoder description.
type hfPre struct {
	Type          string  `json:"type"`
	PreTokenizers []hfPre `json:"pretokenizers"`
	Pattern       struct {
		Regex string `json:"Regex"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	UseRegex       *bool  `json:"use_regex"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
}

// checkLlama3Pre checks that p is the Llama 3 pre-tokenizer: a split by
// llama3Pattern followed by the byte-level mapping without its own regex.
func checkLlama3Pre(p *hfPre) error {
	const want = "want the Llama 3 split pattern followed by ByteLevel (the only pre-tokenizer implemented)"
	if p == nil {
		return fmt.Errorf("no pre_tokenizer: %s", want)
	}
	if p.Type != "Sequence" || len(p.PreTokenizers) != 2 {
		return fmt.Errorf("pre_tokenizer of type %q with %d steps: %s", p.Type, len(p.PreTokenizers), want)
	}
	split, bl := p.PreTokenizers[0], p.PreTokenizers[1]
	if split.Type != "Split" || split.Pattern.Regex != llama3Pattern || split.Behavior != "Isolated" || split.Invert {
		return fmt.Errorf("pre_tokenizer split is %s %q (%s): %s", split.Type, split.Pattern.Regex, split.Behavior, want)
	}
	if bl.Type != "ByteLevel" || bl.UseRegex == nil || *bl.UseRegex || bl.AddPrefixSpace {
		return fmt.Errorf("pre_tokenizer second step is %q (use_regex %v, add_prefix_space %v): %s", bl.Type, bl.UseRegex != nil && *bl.UseRegex, bl.AddPrefixSpace, want)
	}
	return nil
}

// tableSize returns how many entries the token table of a tokenizer.json
// needs for its vocab and added tokens. Every id is checked against the
// number of tokens before it is used, so that ids must run from 0 without
// gaps and a huge one cannot overflow or index past the table.
func tableSize(vocab map[string]int64, added []hfAdded) (int64, error) {
	count := int64(len(vocab) + len(added))
	if count > math.MaxInt32 {
		return 0, fmt.Errorf("%d tokens, more than int32 ids can number", count)
	}
	size := int64(0)
	for tok, id := range vocab {
		if id < 0 || id >= count {
			return 0, fmt.Errorf("vocab token %q has id %d, outside 0 to %d (the file has %d tokens, and ids must run from 0 without gaps)", tok, id, count-1, count)
		}
		size = max(size, id+1)
	}
	for i, a := range added {
		switch {
		case a.ID == nil:
			return 0, fmt.Errorf("added token %d (%q) has no id", i, a.Content)
		case *a.ID < 0 || *a.ID >= count:
			return 0, fmt.Errorf("added token %q has id %d, outside 0 to %d (the file has %d tokens, and ids must run from 0 without gaps)", a.Content, *a.ID, count-1, count)
		}
		size = max(size, *a.ID+1)
	}
	return size, nil
}

func parseJSON(what string, data []byte) (*BPE, error) {
	fail := func(format string, args ...any) (*BPE, error) {
		return nil, fmt.Errorf("tokenizer: %s: %s", what, fmt.Sprintf(format, args...))
	}
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fail("parsing JSON: %v", jsonerr.Reword(err))
	}
	m := f.Model
	switch {
	case m == nil:
		return fail("no model")
	case m.Type != "BPE":
		return fail("model type %q, want BPE", m.Type)
	case m.ByteFallback || m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return fail("BPE options byte_fallback, continuing_subword_prefix or end_of_word_suffix are set; a byte-level BPE uses none")
	case len(m.Vocab) == 0:
		return fail("model has no vocab")
	case len(f.Normalizer) > 0 && string(f.Normalizer) != "null":
		return fail("normalizer %s is not supported (Llama 3 has none)", f.Normalizer)
	case f.Decoder == nil || f.Decoder.Type != "ByteLevel":
		return fail("decoder is not ByteLevel")
	}
	if err := checkLlama3Pre(f.PreTokenizer); err != nil {
		return fail("%v", err)
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return fail("%v", err)
	}

	// Lay out tokens by id: the model's vocab, then the added tokens.
	size, err := tableSize(m.Vocab, f.AddedTokens)
	if err != nil {
		return fail("%v", err)
	}
	raw := make([]string, size)
	kinds := make([]tokenKind, size)
	have := make([]bool, size)
	spelled := make(map[string]int32, len(m.Vocab))
	for tok, id := range m.Vocab {
		if have[id] {
			return fail("vocab tokens %q and %q both have id %d", raw[id], tok, id)
		}
		b, ok := fromByteLevel(tok)
		if !ok {
			return fail("vocab token %q (id %d) is not in byte-level spelling", tok, id)
		}
		raw[id], have[id] = b, true
		spelled[tok] = int32(id)
	}
	for _, a := range f.AddedTokens {
		id := *a.ID
		if a.Content == "" {
			return fail("added token %d is empty", id)
		}
		if a.SingleWord || a.LStrip || a.RStrip {
			return fail("added token %q sets single_word, lstrip or rstrip, which are not supported (Llama 3 sets none)", a.Content)
		}
		switch {
		case have[id] && kinds[id] != kindOrdinary:
			return fail("added tokens %q and %q both have id %d", raw[id], a.Content, id)
		case have[id]:
			if vid, ok := spelled[a.Content]; !ok || int64(vid) != id {
				return fail("added token %q and vocab token %q both have id %d", a.Content, raw[id], id)
			}
		}
		raw[id], have[id] = a.Content, true
		kinds[id] = kindAdded
		if a.Special {
			kinds[id] = kindSpecial
		}
	}
	for id, ok := range have {
		if !ok {
			return fail("no token has id %d", id)
		}
	}
	table, err := mergeTable(spelled, merges)
	if err != nil {
		return fail("%v", err)
	}
	return newBPE(what, raw, kinds, table, m.IgnoreMerges)
}

// parseMerges decodes the model's merges, either "left right" strings or
// [left, right] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("model has no merges")
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		pairs := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("merge %d (%q) is not two tokens separated by a space", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
		return checkMergeCount(pairs)
	}
	var lists [][]string
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, fmt.Errorf("merges are neither strings nor pairs of strings: %v", jsonerr.Reword(err))
	}
	pairs := make([][2]string, len(lists))
	for i, l := range lists {
		if len(l) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(l))
		}
		pairs[i] = [2]string{l[0], l[1]}
	}
	return checkMergeCount(pairs)
}

func checkMergeCount(pairs [][2]string) ([][2]string, error) {
	if len(pairs) == 0 {
		return nil, errors.New("model has no merges")
	}
	return pairs, nil
}

// mergeTable builds the pair table from merges given in byte-level spelling;
// spelled maps that spelling to ids. A merge's rank is its index.
func mergeTable(spelled map[string]int32, merges [][2]string) (*pairTable, error) {
	table := newPairTable(len(merges))
	for rank, m := range merges {
		a, okA := spelled[m[0]]
		b, okB := spelled[m[1]]
		into, okM := spelled[m[0]+m[1]]
		switch {
		case !okA:
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, m[0], m[1], m[0])
		case !okB:
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, m[0], m[1], m[1])
		case !okM:
			return nil, fmt.Errorf("merge %d (%q %q): the merged token %q is not in the vocabulary", rank, m[0], m[1], m[0]+m[1])
		}
		if prev, ok := table.put(pairKey(a, b), uint64(rank)<<32|uint64(uint32(into))); !ok {
			return nil, fmt.Errorf("merge %d (%q %q) repeats merge %d", rank, m[0], m[1], prev>>32)
		}
	}
	return table, nil
}

func parseTiktoken(what string, r io.Reader) (*BPE, error) {
	fail := func(format string, args ...any) (*BPE, error) {
		return nil, fmt.Errorf("tokenizer: %s: %s", what, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	// Ranks are ids, so they must run from 0 without gaps; they are
	// checked once all lines are read, so that a huge rank in a small file
	// cannot make the parser allocate a huge table.
	type entry struct {
		tok        string
		rank, line int
	}
	var entries []entry
	ranks := map[string]int{} // token -> rank
	rankLine := map[int]int{} // rank -> line
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" {
			continue
		}
		b64, num, ok := strings.Cut(text, " ")
		if !ok || strings.Contains(num, " ") {
			return fail("line %d: want \"<base64 token> <rank>\", got %q", line, clip(text))
		}
		tok, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return fail("line %d: bad base64 %q: %v", line, clip(b64), err)
		}
		if len(tok) == 0 {
			return fail("line %d: empty token", line)
		}
		rank, err := strconv.Atoi(num)
		if err != nil || rank < 0 {
			return fail("line %d: bad rank %q", line, clip(num))
		}
		if prev, dup := ranks[string(tok)]; dup {
			return fail("line %d: token %q already has rank %d", line, tok, prev)
		}
		if prev, dup := rankLine[rank]; dup {
			return fail("line %d: rank %d already used on line %d", line, rank, prev)
		}
		entries = append(entries, entry{string(tok), rank, line})
		ranks[string(tok)] = rank
		rankLine[rank] = line
	}
	if err := sc.Err(); err != nil {
		return fail("line %d: %v", line+1, err)
	}
	n := len(entries)
	if n == 0 {
		return fail("no tokens")
	}
	// n distinct ranks in [0, n) leave no gaps.
	for _, e := range entries {
		if e.rank >= n {
			return fail("line %d: rank %d, outside 0 to %d (the file has %d tokens, and ranks must run from 0 without gaps)", e.line, e.rank, n-1, n)
		}
	}
	raw := make([]string, n, n+Llama3NumSpecial)
	kinds := make([]tokenKind, n, n+Llama3NumSpecial)
	for _, e := range entries {
		raw[e.rank] = e.tok
	}
	raw = append(raw, Llama31SpecialTokens()...)
	for range Llama3NumSpecial {
		kinds = append(kinds, kindSpecial)
	}
	// tiktoken merges the adjacent pair whose concatenation has the lowest
	// rank; every way of splitting a token into two tokens is such a pair.
	type split struct{ a, b, into int }
	var splits []split
	for rank, tok := range raw[:n] {
		for k := 1; k < len(tok); k++ {
			a, okA := ranks[tok[:k]]
			b, okB := ranks[tok[k:]]
			if okA && okB {
				splits = append(splits, split{a, b, rank})
			}
		}
	}
	table := newPairTable(len(splits))
	for _, s := range splits {
		table.put(pairKey(int32(s.a), int32(s.b)), uint64(s.into)<<32|uint64(s.into))
	}
	return newBPE(what, raw, kinds, table, true)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// byteRunes maps each byte to the character byte-level BPE spells it with:
// printable Latin-1 bytes stand for themselves, the others are moved to
// U+0100 and up, in byte order.
var byteRunes = func() (t [256]rune) {
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}()

// runeBytes inverts byteRunes; -1 marks characters that spell no byte.
var runeBytes = func() (t [256 + 68]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range byteRunes {
		t[r] = int16(b)
	}
	return t
}()

// fromByteLevel turns a token spelled in byte-level characters into its
// bytes.
func fromByteLevel(s string) (string, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(runeBytes) || runeBytes[r] < 0 {
			return "", false
		}
		out = append(out, byte(runeBytes[r]))
	}
	return string(out), true
}
