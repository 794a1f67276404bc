package tokenizer

import (
	"container/heap"
	"fmt"
	"math"
)

// BPE is a byte-level BPE tokenizer with the Llama 3 pre-tokenizer. Text is
// split into pre-tokens by the Llama 3 pattern; each pre-token is encoded as
// its bytes, which are merged pairwise, lowest merge rank first, into
// vocabulary tokens.
//
// A BPE is immutable and safe for concurrent use.
type BPE struct {
	tokens []string // id -> the bytes it stands for (text for specials)
	// vocab maps the bytes of every ordinary token to its id.
	vocab map[string]int32
	// merges maps a pair of adjacent token ids to the merge rank (high 32
	// bits) and the id of the merged token.
	merges *pairTable
	// wholePieces makes a pre-token that is itself a token encode to that
	// token without merging (tiktoken's behaviour, and tokenizer.json's
	// ignore_merges).
	wholePieces bool
	byteIDs     [256]int32
	// bytePairs holds the merge of every pair of single-byte tokens as
	// rank<<32|into (noRank<<32 for none): the first round of lookups of
	// every merge then stays in a small table instead of the big one.
	bytePairs  []uint64
	special    []bool     // by id: special (control) token
	specials   specialSet // recognised with AllowSpecial
	always     specialSet // added tokens recognised in all text
	specialIDs map[string]int32
	bos, eot   int32
	eos        []int32
}

var _ Tokenizer = (*BPE)(nil)

// tokenKind says how a token of a BPE vocabulary is matched.
type tokenKind uint8

const (
	kindOrdinary tokenKind = iota // produced by BPE merges
	kindSpecial                   // matched in text only with AllowSpecial
	kindAdded                     // matched in all text, before BPE
)

// newBPE builds a BPE from the bytes of each token (by id), each token's
// kind and the merge table, then checks it and finds the Llama 3 control
// tokens. what names the source in errors.
func newBPE(what string, tokens []string, kinds []tokenKind, merges *pairTable, wholePieces bool) (*BPE, error) {
	if len(tokens) >= math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: %s: %d tokens is too many", what, len(tokens))
	}
	t := &BPE{
		tokens:      tokens,
		vocab:       make(map[string]int32, len(tokens)),
		merges:      merges,
		wholePieces: wholePieces,
		special:     make([]bool, len(tokens)),
		specialIDs:  map[string]int32{},
	}
	specials, always := map[string]int32{}, map[string]int32{}
	for id, tok := range tokens {
		switch kinds[id] {
		case kindOrdinary:
			if prev, dup := t.vocab[tok]; dup {
				return nil, fmt.Errorf("tokenizer: %s: tokens %d and %d are both %q", what, prev, id, tok)
			}
			t.vocab[tok] = int32(id)
		case kindSpecial, kindAdded:
			if tok == "" {
				return nil, fmt.Errorf("tokenizer: %s: special token %d is empty", what, id)
			}
			if prev, dup := t.specialIDs[tok]; dup {
				return nil, fmt.Errorf("tokenizer: %s: special tokens %d and %d are both %q", what, prev, id, tok)
			}
			t.specialIDs[tok] = int32(id)
			if kinds[id] == kindSpecial {
				specials[tok] = int32(id)
				t.special[id] = true
			} else {
				always[tok] = int32(id)
			}
		}
	}
	for b := range 256 {
		id, ok := t.vocab[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: byte 0x%02X has no token; a byte-level BPE needs all 256", what, b)
		}
		t.byteIDs[b] = id
	}
	t.bytePairs = make([]uint64, 256*256)
	for i := range t.bytePairs {
		r, m := t.rank(t.byteIDs[i>>8], t.byteIDs[i&0xFF])
		t.bytePairs[i] = uint64(r)<<32 | uint64(uint32(m))
	}
	// Specials are found in AllowSpecial text together with the added
	// tokens that are always matched.
	for k, v := range always {
		specials[k] = v
	}
	t.specials = newSpecialSet(specials)
	t.always = newSpecialSet(always)

	var ok bool
	if t.bos, ok = t.specialIDs[BeginOfText]; !ok {
		return nil, fmt.Errorf("tokenizer: %s: no %s token: not a Llama 3 vocabulary", what, BeginOfText)
	}
	if t.eot, ok = t.specialIDs[EOTID]; !ok {
		return nil, fmt.Errorf("tokenizer: %s: no %s token: not a Llama 3 vocabulary", what, EOTID)
	}
	end, ok := t.specialIDs[EndOfText]
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s: no %s token: not a Llama 3 vocabulary", what, EndOfText)
	}
	// Llama 3.0 vocabularies name id 128008 <|reserved_special_token_4|>;
	// Llama 3.1 models emit it as <|eom_id|>, so it ends generation too.
	eom, ok := t.specialIDs[EOMID]
	if !ok && int(t.bos)+8 < len(tokens) && t.special[t.bos+8] {
		eom, ok = t.bos+8, true
	}
	t.eos = []int32{end}
	if ok {
		t.eos = append(t.eos, eom)
	}
	t.eos = append(t.eos, t.eot)
	return t, nil
}

// VocabSize returns the number of token ids, special tokens included.
func (t *BPE) VocabSize() int { return len(t.tokens) }

// BOS returns the id of <|begin_of_text|>.
func (t *BPE) BOS() int32 { return t.bos }

// EOT returns the id of <|eot_id|>, which ends a chat turn.
func (t *BPE) EOT() int32 { return t.eot }

// EOS returns the ids that end generation: <|end_of_text|>, <|eom_id|> and
// <|eot_id|>.
func (t *BPE) EOS() []int32 { return append([]int32(nil), t.eos...) }

// IsEOS reports whether id is one of EOS.
func (t *BPE) IsEOS(id int32) bool {
	for _, e := range t.eos {
		if id == e {
			return true
		}
	}
	return false
}

// IsSpecial reports whether id is a special token.
func (t *BPE) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// SpecialID returns the id of the special (or added) token whose text is
// name.
func (t *BPE) SpecialID(name string) (int32, bool) {
	id, ok := t.specialIDs[name]
	return id, ok
}

// TokenID returns the id of the ordinary token whose bytes are s.
func (t *BPE) TokenID(s string) (int32, bool) {
	id, ok := t.vocab[s]
	return id, ok
}

// Token returns the bytes token id stands for (the text of a special
// token).
func (t *BPE) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.tokens) {
		return "", false
	}
	return t.tokens[id], true
}

// Encode returns the token ids of text.
func (t *BPE) Encode(text string, opts EncodeOptions) []int32 {
	ids := make([]int32, 0, len(text)/4+2)
	if opts.AddBOS {
		ids = append(ids, t.bos)
	}
	return t.AppendEncode(ids, text, opts.AllowSpecial)
}

// AppendEncode appends the token ids of text to ids and returns the
// extended slice. Special-token text is recognised when allowSpecial is
// set.
func (t *BPE) AppendEncode(ids []int32, text string, allowSpecial bool) []int32 {
	set := &t.always
	if allowSpecial {
		set = &t.specials
	}
	var w mergeWork
	for text != "" {
		pos, id, n := set.find(text)
		if pos < 0 {
			break
		}
		ids = t.appendOrdinary(ids, text[:pos], &w)
		ids = append(ids, id)
		text = text[pos+n:]
	}
	return t.appendOrdinary(ids, text, &w)
}

// appendOrdinary encodes text that holds no special tokens.
func (t *BPE) appendOrdinary(ids []int32, s string, w *mergeWork) []int32 {
	for i := 0; i < len(s); {
		j := nextPiece(s, i)
		piece := s[i:j]
		i = j
		if len(piece) == 1 {
			ids = append(ids, t.byteIDs[piece[0]])
			continue
		}
		if t.wholePieces {
			if id, ok := t.vocab[piece]; ok {
				ids = append(ids, id)
				continue
			}
		}
		if v, ok := w.cache[piece]; ok {
			ids = append(ids, w.arena[v>>32:v>>32+v&0xFFFFFFFF]...)
			continue
		}
		start := len(ids)
		ids = t.mergePiece(ids, piece, w)
		w.remember(piece, ids[start:])
	}
	return ids
}

// Encoding the same pre-token twice gives the same tokens, and text repeats
// its words, so an Encode call that merges many pre-tokens caches their
// tokens. The cache lives for one call: a BPE stays immutable.
const (
	cacheAfter   = 256     // merged pre-tokens before the cache starts
	cacheEntries = 1 << 16 // cache size limit
)

// remember caches the tokens of a merged pre-token.
func (w *mergeWork) remember(piece string, ids []int32) {
	if w.cache == nil {
		if w.merged++; w.merged < cacheAfter {
			return
		}
		w.cache = make(map[string]uint64, 1024)
	}
	if len(w.cache) >= cacheEntries {
		return
	}
	w.cache[piece] = uint64(len(w.arena))<<32 | uint64(len(ids))
	w.arena = append(w.arena, ids...)
}

// noRank marks a pair that does not merge.
const noRank = math.MaxUint32

// rank returns the merge rank of the adjacent tokens a and b and the id
// they merge into, or noRank.
func (t *BPE) rank(a, b int32) (uint32, int32) {
	v, ok := t.merges.get(pairKey(a, b))
	if !ok {
		return noRank, 0
	}
	return uint32(v >> 32), int32(uint32(v))
}

// heapThreshold is the pre-token length above which merging uses a heap
// instead of rescanning all pairs after each merge.
const heapThreshold = 64

// mergeWork holds buffers reused across the pieces of one Encode call, and
// its cache.
type mergeWork struct {
	cache  map[string]uint64 // pre-token -> offset<<32 | length in arena
	arena  []int32
	merged int
	ids    []int32
	ranks  []uint32
	into   []int32
	heap   pairHeap
	next   []int32
	prev   []int32
}

// mergePiece appends the tokens of one pre-token, merging its bytes.
func (t *BPE) mergePiece(out []int32, piece string, w *mergeWork) []int32 {
	if len(piece) > heapThreshold {
		return t.mergePieceHeap(out, piece, w)
	}
	n := len(piece)
	ids := w.ids[:0]
	for i := range n {
		ids = append(ids, t.byteIDs[piece[i]])
	}
	ranks, into := w.ranks[:0], w.into[:0]
	for i := range n - 1 {
		v := t.bytePairs[uint16(piece[i])<<8|uint16(piece[i+1])]
		ranks = append(ranks, uint32(v>>32))
		into = append(into, int32(uint32(v)))
	}
	for len(ids) > 1 {
		best, bestRank := -1, uint32(noRank)
		for i, r := range ranks {
			if r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		ids[best] = into[best]
		ids = append(ids[:best+1], ids[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		into = append(into[:best], into[best+1:]...)
		if best > 0 {
			ranks[best-1], into[best-1] = t.rank(ids[best-1], ids[best])
		}
		if best < len(ids)-1 {
			ranks[best], into[best] = t.rank(ids[best], ids[best+1])
		}
	}
	w.ids, w.ranks, w.into = ids, ranks, into
	return append(out, ids...)
}

// pair is a candidate merge of the tokens at positions left and right.
type pair struct {
	rank        uint32
	left, right int32
	a, b        int32 // the token ids when the candidate was made
	into        int32
}

// pairHeap orders candidates by rank, then by position.
type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].left < h[j].left
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergePieceHeap is mergePiece for long pre-tokens: the symbols form a
// linked list and candidate pairs wait in a heap, so merging takes
// O(n log n) instead of O(n²). Stale candidates are skipped when popped.
func (t *BPE) mergePieceHeap(out []int32, piece string, w *mergeWork) []int32 {
	n := len(piece)
	ids, next, prev := w.ids[:0], w.next[:0], w.prev[:0]
	for i := range n {
		ids = append(ids, t.byteIDs[piece[i]])
		next = append(next, int32(i+1))
		prev = append(prev, int32(i-1))
	}
	next[n-1] = -1
	h := w.heap[:0]
	push := func(l, r int32) {
		if rk, m := t.rank(ids[l], ids[r]); rk != noRank {
			heap.Push(&h, pair{rank: rk, left: l, right: r, a: ids[l], b: ids[r], into: m})
		}
	}
	for i := range n - 1 {
		push(int32(i), int32(i+1))
	}
	const dead = -2
	for h.Len() > 0 {
		c := heap.Pop(&h).(pair)
		if prev[c.left] == dead || prev[c.right] == dead || next[c.left] != c.right ||
			ids[c.left] != c.a || ids[c.right] != c.b {
			continue
		}
		ids[c.left] = c.into
		nr := next[c.right]
		next[c.left] = nr
		if nr >= 0 {
			prev[nr] = c.left
		}
		prev[c.right] = dead
		if p := prev[c.left]; p >= 0 {
			push(p, c.left)
		}
		if nr >= 0 {
			push(c.left, nr)
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	w.ids, w.next, w.prev, w.heap = ids, next, prev, h
	return out
}

// Decode returns the text of ids; special tokens decode to their text.
func (t *BPE) Decode(ids []int32) (string, error) {
	var buf []byte
	for _, id := range ids {
		var err error
		if buf, err = t.AppendDecoded(buf, -1, id); err != nil {
			return "", err
		}
	}
	return string(buf), nil
}

// AppendDecoded appends the bytes of token id to dst. Byte-level BPE
// decoding does not depend on prev.
func (t *BPE) AppendDecoded(dst []byte, prev, id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(t.tokens) {
		return dst, fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.tokens))
	}
	return append(dst, t.tokens[id]...), nil
}
