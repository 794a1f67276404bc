package tokenizer

import (
	"container/heap"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceMark is the character SentencePiece writes for a space.
const spaceMark = "▁"

// SentencePieceConfig describes a SentencePiece BPE vocabulary as a GGUF
// file stores it (tokenizer.ggml.model "llama").
type SentencePieceConfig struct {
	// Tokens holds each token's text, with "▁" for spaces and "<0xAB>"
	// for byte tokens (tokenizer.ggml.tokens).
	Tokens []string
	// Scores holds each token's merge score; higher merges first
	// (tokenizer.ggml.scores).
	Scores []float32
	// Types holds each token's TokenType (tokenizer.ggml.token_type). When
	// nil, every token is normal except <unk>, <s>, </s> and tokens of the
	// form <0xAB>.
	Types []int32
	// BOS, EOS and Unknown are the ids of the beginning, end and unknown
	// tokens (tokenizer.ggml.bos_token_id, ...); Unknown may be -1.
	BOS, EOS, Unknown int32
	// NoSpacePrefix turns off the space added in front of the text
	// (tokenizer.ggml.add_space_prefix = false).
	NoSpacePrefix bool
}

// SentencePiece is the score-based BPE tokenizer of Llama 2 era models, with
// llama.cpp's semantics: the text gets a leading space, spaces become "▁",
// the text is split into characters, and the adjacent pair whose merge is
// the highest-scoring token is merged until none is left (ties go to the
// leftmost pair). Characters without a token fall back to byte tokens
// <0xAB>. Decoding turns "▁" back into spaces, byte tokens into bytes, and
// drops the leading space of the first token and of a token after a
// control token.
//
// A SentencePiece is immutable and safe for concurrent use.
type SentencePiece struct {
	tokens   []string
	scores   []float32
	types    []TokenType
	vocab    map[string]int32 // text of normal and user-defined tokens
	byteIDs  [256]int32       // -1 where the vocabulary has no byte token
	specials specialSet       // control tokens, for AllowSpecial
	bos, eos int32
	unk      int32
	prefix   bool
}

var _ Tokenizer = (*SentencePiece)(nil)

// NewSentencePiece builds a SentencePiece tokenizer, checking the arrays
// against each other.
func NewSentencePiece(cfg SentencePieceConfig) (*SentencePiece, error) {
	n := len(cfg.Tokens)
	fail := func(format string, args ...any) (*SentencePiece, error) {
		return nil, fmt.Errorf("tokenizer: SentencePiece vocabulary: %s", fmt.Sprintf(format, args...))
	}
	switch {
	case n == 0:
		return fail("no tokens")
	case len(cfg.Scores) != n:
		return fail("%d scores for %d tokens", len(cfg.Scores), n)
	case cfg.Types != nil && len(cfg.Types) != n:
		return fail("%d token types for %d tokens", len(cfg.Types), n)
	case cfg.BOS < 0 || int(cfg.BOS) >= n:
		return fail("BOS id %d out of range [0, %d)", cfg.BOS, n)
	case cfg.EOS < 0 || int(cfg.EOS) >= n:
		return fail("EOS id %d out of range [0, %d)", cfg.EOS, n)
	case cfg.Unknown < -1 || int(cfg.Unknown) >= n:
		return fail("unknown-token id %d out of range [-1, %d)", cfg.Unknown, n)
	}
	t := &SentencePiece{
		tokens: cfg.Tokens,
		scores: cfg.Scores,
		types:  make([]TokenType, n),
		vocab:  make(map[string]int32, n),
		bos:    cfg.BOS,
		eos:    cfg.EOS,
		unk:    cfg.Unknown,
		prefix: !cfg.NoSpacePrefix,
	}
	for i := range t.byteIDs {
		t.byteIDs[i] = -1
	}
	control := map[string]int32{}
	for id, tok := range cfg.Tokens {
		typ := TokenNormal
		if cfg.Types != nil {
			typ = TokenType(cfg.Types[id])
		} else if _, ok := parseByteToken(tok); ok {
			typ = TokenByte
		} else if tok == "<unk>" {
			typ = TokenUnknown
		} else if tok == "<s>" || tok == "</s>" {
			typ = TokenControl
		}
		t.types[id] = typ
		switch typ {
		case TokenNormal, TokenUserDefined:
			if tok == "" {
				return fail("token %d is empty", id)
			}
			if prev, dup := t.vocab[tok]; dup {
				return fail("tokens %d and %d are both %q", prev, id, tok)
			}
			t.vocab[tok] = int32(id)
		case TokenByte:
			b, ok := parseByteToken(tok)
			if !ok {
				return fail("byte token %d is %q, want the form <0xAB>", id, tok)
			}
			if t.byteIDs[b] >= 0 {
				return fail("tokens %d and %d are both byte 0x%02X", t.byteIDs[b], id, b)
			}
			t.byteIDs[b] = int32(id)
		case TokenControl:
			if tok != "" {
				control[tok] = int32(id)
			}
		case TokenUnknown, TokenUnused:
		default:
			return fail("token %d (%q) has unknown type %d", id, tok, typ)
		}
	}
	if t.unk < 0 {
		for b, id := range t.byteIDs {
			if id < 0 {
				return fail("no unknown token and no byte token for 0x%02X: some text could not be encoded", b)
			}
		}
	}
	t.specials = newSpecialSet(control)
	return t, nil
}

// parseByteToken recognises a byte token "<0xAB>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(s[3])
	lo, ok2 := hexDigit(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// VocabSize returns the number of tokens.
func (t *SentencePiece) VocabSize() int { return len(t.tokens) }

// BOS returns the id of the beginning-of-sequence token.
func (t *SentencePiece) BOS() int32 { return t.bos }

// EOT returns the end-of-sequence id: these vocabularies have no separate
// end-of-turn token.
func (t *SentencePiece) EOT() int32 { return t.eos }

// EOS returns the end-of-sequence id.
func (t *SentencePiece) EOS() []int32 { return []int32{t.eos} }

// IsEOS reports whether id is the end-of-sequence token.
func (t *SentencePiece) IsEOS(id int32) bool { return id == t.eos }

// IsSpecial reports whether id is a control or unknown token.
func (t *SentencePiece) IsSpecial(id int32) bool {
	if id < 0 || int(id) >= len(t.types) {
		return false
	}
	return t.types[id] == TokenControl || t.types[id] == TokenUnknown
}

// SpecialID returns the id of the control token whose text is name.
func (t *SentencePiece) SpecialID(name string) (int32, bool) {
	id, ok := t.specials.ids[name]
	return id, ok
}

// Encode returns the token ids of text. With AllowSpecial, control-token
// text such as "</s>" becomes that token, and the text after it gets its
// own leading space, as llama.cpp does.
func (t *SentencePiece) Encode(text string, opts EncodeOptions) []int32 {
	var ids []int32
	if opts.AddBOS {
		ids = append(ids, t.bos)
	}
	var w spWork
	if opts.AllowSpecial {
		for text != "" {
			pos, id, n := t.specials.find(text)
			if pos < 0 {
				break
			}
			ids = t.appendText(ids, text[:pos], &w)
			ids = append(ids, id)
			text = text[pos+n:]
		}
	}
	return t.appendText(ids, text, &w)
}

// spSymbol is a run of the text in the merge list.
type spSymbol struct {
	start, end int // byte range in the escaped text
	prev, next int
}

// spPair is a candidate merge of symbols left and right.
type spPair struct {
	score       float32
	left, right int
	size        int // byte length of the merge, to detect stale entries
}

type spHeap []spPair

func (h spHeap) Len() int { return len(h) }
func (h spHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}
func (h spHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spHeap) Push(x any)   { *h = append(*h, x.(spPair)) }
func (h *spHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// spWork holds buffers reused within one Encode call.
type spWork struct {
	syms []spSymbol
	heap spHeap
}

// appendText encodes one run of text without control tokens.
func (t *SentencePiece) appendText(ids []int32, text string, w *spWork) []int32 {
	if text == "" {
		return ids
	}
	if t.prefix {
		text = " " + text
	}
	s := strings.ReplaceAll(text, " ", spaceMark)

	syms := w.syms[:0]
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		syms = append(syms, spSymbol{start: i, end: i + n, prev: len(syms) - 1, next: len(syms) + 1})
		i += n
	}
	syms[len(syms)-1].next = -1
	h := w.heap[:0]
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		id, ok := t.vocab[s[syms[l].start:syms[r].end]]
		if !ok || t.types[id] != TokenNormal {
			return
		}
		heap.Push(&h, spPair{score: t.scores[id], left: l, right: r, size: syms[r].end - syms[l].start})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for h.Len() > 0 {
		p := heap.Pop(&h).(spPair)
		l, r := &syms[p.left], &syms[p.right]
		// Skip candidates whose symbols have since been merged.
		if l.end == l.start || r.end == r.start || l.next != p.right || r.end-l.start != p.size {
			continue
		}
		l.end = r.end
		r.start, r.end = 0, 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = p.left
		}
		try(l.prev, p.left)
		try(p.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		piece := s[syms[i].start:syms[i].end]
		if id, ok := t.vocab[piece]; ok {
			ids = append(ids, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteIDs[piece[j]]; id >= 0 {
				ids = append(ids, id)
			} else {
				ids = append(ids, t.unk)
			}
		}
	}
	w.syms, w.heap = syms, h
	return ids
}

// Decode returns the text of ids.
func (t *SentencePiece) Decode(ids []int32) (string, error) {
	var buf []byte
	prev := int32(-1)
	for _, id := range ids {
		var err error
		if buf, err = t.AppendDecoded(buf, prev, id); err != nil {
			return "", err
		}
		prev = id
	}
	return string(buf), nil
}

// AppendDecoded appends the text of token id, following prev, to dst: byte
// tokens give their byte, "▁" gives a space, and a leading space is dropped
// at the start of the sequence (prev -1) and after a control token, where
// the encoder added it.
func (t *SentencePiece) AppendDecoded(dst []byte, prev, id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(t.tokens) {
		return dst, fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.tokens))
	}
	tok := t.tokens[id]
	switch t.types[id] {
	case TokenByte:
		b, _ := parseByteToken(tok)
		return append(dst, b), nil
	case TokenControl, TokenUnknown, TokenUnused:
		return append(dst, tok...), nil
	}
	if t.prefix && (prev < 0 || int(prev) < len(t.types) && t.types[prev] == TokenControl) {
		tok = strings.TrimPrefix(tok, spaceMark)
	}
	return append(dst, strings.ReplaceAll(tok, spaceMark, " ")...), nil
}
