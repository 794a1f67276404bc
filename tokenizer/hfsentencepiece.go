package tokenizer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// This file writes a SentencePiece vocabulary as Hugging Face's
// tokenizer.json, in the form the Hugging Face converter gives Llama's
// (SentencePiece BPE) vocabularies, and reads such a file back.

// spMerge is a merge of a SentencePiece vocabulary as a Hugging Face BPE
// lists it: the tokens left and right, whose concatenation is token into.
type spMerge struct {
	left, right string
	into        int32
}

// hfMerges returns the merges with which a Hugging Face BPE encodes text
// as t does: every way of splitting a normal token into two tokens, ranked
// by the score of the token they make (higher first), then by its id, and
// the splits of one token with the longer left part first. A BPE applies
// the lowest-ranked merge first where SentencePiece merges the
// highest-scoring pair, so the two agree; where two tokens have the same
// score, SentencePiece takes the leftmost pair and the BPE the token with
// the lower id, which no ranking can express.
//
// It is an error, naming the token, when a BPE cannot encode as t does:
// when a byte has no byte token (t encodes that byte as <unk>, the BPE's
// byte fallback gives one <unk> for the whole character), or when a token
// is made from a character that is no token (t merges the character, the
// BPE falls back to its bytes).
func (t *SentencePiece) hfMerges() ([]spMerge, error) {
	for b, id := range t.byteIDs {
		if id < 0 {
			return nil, fmt.Errorf("there is no byte token <0x%02X>: turnwise encodes that byte as the unknown token, where the byte fallback of a Hugging Face BPE gives one unknown token for the whole character", b)
		}
	}
	var ms []spMerge
	for id, tok := range t.tokens {
		if t.types[id] != TokenNormal {
			continue
		}
		for k := range tok { // each character boundary
			if k == 0 {
				continue
			}
			l, r := tok[:k], tok[k:]
			_, okL := t.vocab[l]
			_, okR := t.vocab[r]
			switch {
			case okL && okR:
				ms = append(ms, spMerge{l, r, int32(id)})
			case (okL || oneRune(l)) && (okR || oneRune(r)):
				c := l
				if okL {
					c = r
				}
				return nil, fmt.Errorf("token %d (%q) is made from %q, which is no token: turnwise merges that character, where a Hugging Face BPE falls back to its bytes", id, tok, c)
			}
		}
	}
	slices.SortFunc(ms, func(a, b spMerge) int {
		if c := cmp.Compare(t.scores[b.into], t.scores[a.into]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.into, b.into); c != 0 {
			return c
		}
		return cmp.Compare(len(b.left), len(a.left))
	})
	return ms, nil
}

// oneRune reports whether s is a single character.
func oneRune(s string) bool {
	_, n := utf8.DecodeRuneInString(s)
	return n > 0 && n == len(s)
}

// hfOut returns t's tokenizer.json, in the form the Hugging Face
// converter gives Llama's SentencePiece vocabularies: a BPE model of every
// token with merges derived from the scores (hfMerges), byte_fallback to
// the <0xAB> tokens and fuse_unk; the control and unknown tokens as special
// added tokens; the normalizer Prepend "▁" (unless t adds no leading
// space) and Replace " " with "▁", and no pre-tokenizer, so that every run
// of text between special tokens gets its leading space as in Encode; a
// post-processor adding BOS; and the decoder Replace "▁" with " ",
// ByteFallback, Fuse and Strip one leading space. A vocabulary that cannot
// be written so gives an error wrapping ErrNoHFForm.
func (t *SentencePiece) hfOut() (hfOut, error) {
	fail := func(format string, args ...any) (hfOut, error) {
		return hfOut{}, fmt.Errorf("tokenizer: SentencePiece: %w: %s", ErrNoHFForm, fmt.Sprintf(format, args...))
	}
	merges, err := t.hfMerges()
	if err != nil {
		return fail("%v", err)
	}
	vocab := make(map[string]int32, len(t.tokens))
	var added []hfAddedOut
	for id, tok := range t.tokens {
		if tok == "" {
			return fail("token %d is empty", id)
		}
		if prev, dup := vocab[tok]; dup {
			return fail("tokens %d and %d are both %q, and a Hugging Face vocabulary has one id for a text", prev, id, tok)
		}
		vocab[tok] = int32(id)
		if t.types[id] == TokenControl || t.types[id] == TokenUnknown {
			added = append(added, hfAddedOut{ID: int32(id), Content: tok, Special: true})
		}
	}
	// Merges are "left right" strings unless a token holds a space, which
	// only the [left, right] form can say.
	spaced := false
	for _, m := range merges {
		spaced = spaced || strings.Contains(m.left+m.right, " ")
	}
	var list any
	if spaced {
		pairs := make([][2]string, len(merges))
		for i, m := range merges {
			pairs[i] = [2]string{m.left, m.right}
		}
		list = pairs
	} else {
		strs := make([]string, len(merges))
		for i, m := range merges {
			strs[i] = m.left + " " + m.right
		}
		list = strs
	}
	file := newHFOut(vocab, list, false, added, nil, t.tokens[t.bos], t.bos)
	replace := func(from, to string) map[string]any {
		return map[string]any{"type": "Replace", "pattern": map[string]any{"String": from}, "content": to}
	}
	norms := []any{replace(" ", spaceMark)}
	decoders := []any{replace(spaceMark, " "), map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}
	if t.prefix {
		norms = append([]any{map[string]any{"type": "Prepend", "prepend": spaceMark}}, norms...)
		decoders = append(decoders, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	file.Normalizer = map[string]any{"type": "Sequence", "normalizers": norms}
	file.Decoder = map[string]any{"type": "Sequence", "decoders": decoders}
	file.Model.FuseUnk, file.Model.ByteFallback = true, true
	if t.unk >= 0 {
		file.Model.UnkToken = t.tokens[t.unk]
	}
	return file, nil
}

// hfStep is a normalizer or decoder of tokenizer.json.
type hfStep struct {
	Type        string   `json:"type"`
	Normalizers []hfStep `json:"normalizers"`
	Decoders    []hfStep `json:"decoders"`
	Prepend     string   `json:"prepend"`
	Pattern     struct {
		String *string `json:"String"`
	} `json:"pattern"`
	Content string `json:"content"`
	Start   int    `json:"start"`
	Stop    int    `json:"stop"`
}

// flat returns the steps of s, the steps of a Sequence in order.
func (s *hfStep) flat() []hfStep {
	if s == nil {
		return nil
	}
	if s.Type != "Sequence" {
		return []hfStep{*s}
	}
	var out []hfStep
	for _, c := range append(slices.Clone(s.Normalizers), s.Decoders...) {
		out = append(out, c.flat()...)
	}
	return out
}

// isReplace reports whether s replaces the string from with to.
func (s hfStep) isReplace(from, to string) bool {
	return s.Type == "Replace" && s.Pattern.String != nil && *s.Pattern.String == from && s.Content == to
}

// stepTypes lists the types of steps, for an error message.
func stepTypes(steps []hfStep) string {
	if len(steps) == 0 {
		return "none"
	}
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Type
	}
	return strings.Join(names, ", ")
}

// spFile is the part of a SentencePiece tokenizer.json that matters here.
type spFile struct {
	AddedTokens   []hfAdded       `json:"added_tokens"`
	Normalizer    *hfStep         `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Decoder       *hfStep         `json:"decoder"`
	PostProcessor *struct {
		Type   string `json:"type"`
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	} `json:"post_processor"`
	Model struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int64 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		UnkToken                *string          `json:"unk_token"`
		Dropout                 *float64         `json:"dropout"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		ContinuingSubwordPrefix string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         string           `json:"end_of_word_suffix"`
	} `json:"model"`
}

// isSentencePieceJSON reports whether the tokenizer.json data holds a
// SentencePiece vocabulary: a BPE with byte_fallback, as the Hugging Face
// converter writes Llama's.
func isSentencePieceJSON(data []byte) bool {
	var f struct {
		Model *struct {
			Type         string `json:"type"`
			ByteFallback bool   `json:"byte_fallback"`
		} `json:"model"`
	}
	return json.Unmarshal(data, &f) == nil && f.Model != nil && f.Model.Type == "BPE" && f.Model.ByteFallback
}

// parseSentencePieceJSON reads a SentencePiece vocabulary from the
// tokenizer.json data (what names the file in errors) as HFFiles writes it
// and as Hugging Face's converter writes Llama's: a BPE with byte_fallback,
// the normalizer Prepend "▁" (or none, for a vocabulary without a leading
// space) and Replace " " with "▁", no pre-tokenizer, and the decoder
// Replace "▁" with " ", ByteFallback, Fuse, and Strip one leading space
// when there is Prepend.
//
// The tokens come back with their types: the <0xAB> tokens are byte
// tokens, unk_token is the unknown token, the special added tokens are
// control tokens, and the others are normal, save a token that some two
// tokens make but no merge does, which is user-defined (found in the
// vocabulary but never merged into). A token's score is minus the rank of
// the first merge that makes it (0 for tokens no merge makes), so the
// tokenizer merges as the file's BPE does. The merges must be every split
// of a token into two tokens, as HFFiles derives them. Where the file
// ranks a token's splits apart, with others between them (Hugging Face's
// converter does so for tokens of equal score, such as the runs of "▁"
// that Llama's vocabulary scores -1e9), every split of the token takes the
// rank of the first, since SentencePiece gives them one score. The BOS
// token is the one the post-processor puts first (else <s>); the EOS token
// is eos, else </s>.
func parseSentencePieceJSON(what string, data []byte, eos string) (*SentencePiece, error) {
	fail := func(format string, args ...any) (*SentencePiece, error) {
		return nil, fmt.Errorf("tokenizer: %s: SentencePiece vocabulary: %s", what, fmt.Sprintf(format, args...))
	}
	var f spFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fail("parsing JSON: %v", jsonerr.Reword(err))
	}
	m := f.Model
	switch {
	case m.Type != "BPE" || !m.ByteFallback:
		return fail("model is not a BPE with byte_fallback")
	case m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return fail("BPE options continuing_subword_prefix or end_of_word_suffix are set; a SentencePiece vocabulary uses neither")
	case m.IgnoreMerges:
		return fail("ignore_merges is set (a word that is a token is taken whole), where SentencePiece merges every text")
	case m.Dropout != nil && *m.Dropout != 0:
		return fail("dropout %v is set: turnwise encodes without dropout", *m.Dropout)
	case len(m.Vocab) == 0:
		return fail("model has no vocab")
	}

	// The leading space and the spaces as "▁", from the normalizer.
	const wantNorm = `Prepend "▁" (or nothing) then Replace " " with "▁", as Hugging Face writes Llama's SentencePiece vocabulary`
	norm := f.Normalizer.flat()
	prefix := len(norm) == 2 && norm[0].Type == "Prepend" && norm[0].Prepend == spaceMark
	if !(prefix || len(norm) == 1) || !norm[len(norm)-1].isReplace(" ", spaceMark) {
		return fail("normalizer steps are %s: want %s", stepTypes(norm), wantNorm)
	}
	if p := strings.TrimSpace(string(f.PreTokenizer)); p != "" && p != "null" {
		return fail(`pre_tokenizer %.80s is not supported (a Metaspace pre-tokenizer adds no "▁" in front of text that starts with a space, where SentencePiece does): want none, and the normalizer %s`, p, wantNorm)
	}
	dec := f.Decoder.flat()
	okDec := len(dec) >= 3 && dec[0].isReplace(spaceMark, " ") && dec[1].Type == "ByteFallback" && dec[2].Type == "Fuse"
	if prefix {
		okDec = okDec && len(dec) == 4 && dec[3].Type == "Strip" && dec[3].Content == " " && dec[3].Start == 1 && dec[3].Stop == 0
	} else {
		okDec = okDec && len(dec) == 3
	}
	if !okDec {
		strip := ""
		if prefix {
			strip = `, then Strip one leading " " (the normalizer prepends "▁")`
		}
		return fail(`decoder steps are %s: want Replace "▁" with " ", ByteFallback, Fuse%s`, stepTypes(dec), strip)
	}

	// Lay out the tokens by id, as parseJSON does: the vocab, then the
	// added tokens.
	size, err := tableSize(m.Vocab, f.AddedTokens)
	if err != nil {
		return fail("%v", err)
	}
	tokens := make([]string, size)
	types := make([]int32, size)
	have := make([]bool, size)
	for tok, id := range m.Vocab {
		if have[id] {
			return fail("vocab tokens %q and %q both have id %d", tokens[id], tok, id)
		}
		tokens[id], have[id] = tok, true
		types[id] = int32(TokenNormal)
		if _, ok := parseByteToken(tok); ok {
			types[id] = int32(TokenByte)
		}
	}
	unk := int32(-1)
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fail("unk_token %q is not in the vocab", *m.UnkToken)
		}
		unk = int32(id)
		types[unk] = int32(TokenUnknown)
	}
	added := make([]bool, size)
	for _, a := range f.AddedTokens {
		id := *a.ID
		switch {
		case a.Content == "":
			return fail("added token %d is empty", id)
		case !a.Special:
			return fail("added token %q is not special, which is not supported (turnwise's SentencePiece matches only control tokens in text)", a.Content)
		case a.SingleWord || a.LStrip || a.RStrip:
			return fail("added token %q sets single_word, lstrip or rstrip, which are not supported", a.Content)
		case added[id]:
			return fail("added tokens %q and %q both have id %d", tokens[id], a.Content, id)
		case have[id] && tokens[id] != a.Content:
			return fail("added token %q and vocab token %q both have id %d", a.Content, tokens[id], id)
		}
		tokens[id], have[id], added[id] = a.Content, true, true
		if int32(id) != unk {
			types[id] = int32(TokenControl)
		}
	}
	for id, ok := range have {
		if !ok {
			return fail("no token has id %d", id)
		}
	}

	// The merges: each makes a normal token from two, and sets the score
	// of the token it makes the first time.
	var pairs [][2]string
	var list []json.RawMessage
	if err := json.Unmarshal(m.Merges, &list); err != nil {
		return fail("merges are not a list: %v", jsonerr.Reword(err))
	}
	if len(list) > 0 {
		var err error
		if pairs, err = parseMerges(m.Merges); err != nil {
			return fail("%v", err)
		}
	}
	normal := func(s string) (int32, bool) {
		id, ok := m.Vocab[s]
		return int32(id), ok && types[id] == int32(TokenNormal)
	}
	first := map[int32]int{}
	seen := make(map[[2]string]int, len(pairs))
	for rank, p := range pairs {
		into, okM := normal(p[0] + p[1])
		for _, part := range []string{p[0], p[1]} {
			if _, ok := normal(part); !ok {
				return fail("merge %d (%q %q): %q is not a normal token of the vocab", rank, p[0], p[1], part)
			}
		}
		if !okM {
			return fail("merge %d (%q %q): %q is not a normal token of the vocab", rank, p[0], p[1], p[0]+p[1])
		}
		if prev, dup := seen[p]; dup {
			return fail("merge %d (%q %q) repeats merge %d", rank, p[0], p[1], prev)
		}
		seen[p] = rank
		if _, ok := first[into]; !ok {
			first[into] = rank
		}
	}
	scores := make([]float32, size)
	for id, tok := range tokens {
		if types[id] != int32(TokenNormal) {
			continue
		}
		if rank, ok := first[int32(id)]; ok {
			scores[id] = -float32(rank + 1)
			continue
		}
		// A token some two tokens make but no merge does: never merged
		// into, as the file's BPE never makes it.
		plain := func(s string) bool {
			id, ok := m.Vocab[s]
			return ok && (types[id] == int32(TokenNormal) || types[id] == int32(TokenUserDefined))
		}
		for k := range tok {
			if k > 0 && plain(tok[:k]) && plain(tok[k:]) {
				types[id] = int32(TokenUserDefined)
				break
			}
		}
	}

	cfg := SentencePieceConfig{Tokens: tokens, Scores: scores, Types: types, Unknown: unk, NoSpacePrefix: !prefix}
	bos := "<s>"
	if pp := f.PostProcessor; pp != nil && pp.Type == "TemplateProcessing" && len(pp.Single) > 0 && pp.Single[0].SpecialToken != nil {
		bos = pp.Single[0].SpecialToken.ID
	}
	eosFrom := "tokenizer_config.json beside the file names it"
	if eos == "" {
		eos, eosFrom = "</s>", "no tokenizer_config.json beside the file names another"
	}
	for _, sp := range []struct {
		name, role, from string
		id               *int32
	}{{bos, "BOS", "the post-processor puts it first, or <s> without one", &cfg.BOS}, {eos, "EOS", eosFrom, &cfg.EOS}} {
		id := slices.Index(tokens, sp.name)
		if id < 0 {
			return fail("the %s token %q (%s) is not in the vocabulary", sp.role, sp.name, sp.from)
		}
		*sp.id = int32(id)
	}
	t, err := NewSentencePiece(cfg)
	if err != nil {
		return fail("%v", err)
	}

	// The file's merges must be those the scores give, so that turnwise,
	// which merges any two tokens making a token, encodes as its BPE does.
	want, err := t.hfMerges()
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range want {
		if _, ok := seen[[2]string{w.left, w.right}]; !ok {
			return fail("no merge of %q and %q, which make %q: SentencePiece merges any two tokens whose concatenation is a token", w.left, w.right, tokens[w.into])
		}
	}
	if len(pairs) != len(want) { // each pair is one of want, so cannot happen
		return fail("%d merges, where the vocabulary's tokens make %d", len(pairs), len(want))
	}
	return t, nil
}

// hfConfigEOS returns the eos_token that the tokenizer_config.json at path
// names, "" when the file does not exist or names none.
func hfConfigEOS(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	var cfg struct {
		EOS json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("tokenizer: %s: %w", path, jsonerr.Reword(err))
	}
	if len(cfg.EOS) == 0 || string(cfg.EOS) == "null" {
		return "", nil
	}
	var name string
	if json.Unmarshal(cfg.EOS, &name) == nil {
		return name, nil
	}
	var tok struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(cfg.EOS, &tok); err != nil {
		return "", fmt.Errorf("tokenizer: %s: eos_token is neither a string nor a token with content", path)
	}
	return tok.Content, nil
}
