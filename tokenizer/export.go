package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file writes the tokenizers out in the forms other tools load: GGUF
// metadata as llama.cpp reads it, and Hugging Face's tokenizer files.

// GGUFMetadata returns the metadata that describes tok in a GGUF file as
// llama.cpp reads it: tokenizer.ggml.model, .tokens, .token_type, .merges
// (byte-level BPE) or .scores (SentencePiece), the BOS and EOS ids,
// .add_bos_token, and tokenizer.chat_template where the chat format has a
// template (ChatTemplate, ByteChatTemplate). FromGGUFMetadata builds tok
// back from it.
//
// The byte tokenizer is written as a byte-level BPE ("gpt2") whose
// vocabulary is the 256 bytes, each at the id of its value and spelled in
// byte-level characters, then <bos> and <eos> as control tokens, with no
// merges. That is what it is: with nothing to merge, every byte of the
// text becomes its own token whatever the pre-tokenizer splits, so
// llama.cpp encodes any text to the ids Bytes gives and decodes them back
// to the same bytes. A SentencePiece ("llama") vocabulary cannot say it:
// SentencePiece turns spaces into "▁" before falling back to bytes, and
// adds a leading space.
func GGUFMetadata(tok Tokenizer) (map[string]any, error) {
	switch t := tok.(type) {
	case Bytes:
		tokens, types := bytesVocab()
		return map[string]any{
			"tokenizer.ggml.model":         "gpt2",
			"tokenizer.ggml.pre":           "default",
			"tokenizer.ggml.tokens":        tokens,
			"tokenizer.ggml.token_type":    types,
			"tokenizer.ggml.merges":        []string{},
			"tokenizer.ggml.bos_token_id":  uint32(BytesBOS),
			"tokenizer.ggml.eos_token_id":  uint32(BytesEOS),
			"tokenizer.ggml.add_bos_token": true,
			"tokenizer.ggml.add_eos_token": false,
			"tokenizer.chat_template":      ByteChatTemplate,
		}, nil
	case *BPE:
		tokens, types := t.ggufVocab()
		meta := map[string]any{
			"tokenizer.ggml.model":         "gpt2",
			"tokenizer.ggml.pre":           "llama-bpe",
			"tokenizer.ggml.tokens":        tokens,
			"tokenizer.ggml.token_type":    types,
			"tokenizer.ggml.merges":        t.mergeStrings(),
			"tokenizer.ggml.bos_token_id":  uint32(t.bos),
			"tokenizer.ggml.eos_token_id":  uint32(t.eos[0]),
			"tokenizer.ggml.eot_token_id":  uint32(t.eot),
			"tokenizer.ggml.add_bos_token": true,
			"tokenizer.ggml.add_eos_token": false,
		}
		if HasChatTokens(t) {
			meta["tokenizer.chat_template"] = ChatTemplate
		}
		return meta, nil
	case *SentencePiece:
		types := make([]int32, len(t.types))
		for i, typ := range t.types {
			types[i] = int32(typ)
		}
		meta := map[string]any{
			"tokenizer.ggml.model":            "llama",
			"tokenizer.ggml.tokens":           slices.Clone(t.tokens),
			"tokenizer.ggml.scores":           slices.Clone(t.scores),
			"tokenizer.ggml.token_type":       types,
			"tokenizer.ggml.bos_token_id":     uint32(t.bos),
			"tokenizer.ggml.eos_token_id":     uint32(t.eos),
			"tokenizer.ggml.add_space_prefix": t.prefix,
			"tokenizer.ggml.add_bos_token":    true,
			"tokenizer.ggml.add_eos_token":    false,
		}
		if t.unk >= 0 {
			meta["tokenizer.ggml.unknown_token_id"] = uint32(t.unk)
		}
		return meta, nil
	}
	return nil, fmt.Errorf("tokenizer: a %T has no GGUF form", tok)
}

// bytesVocab returns the byte tokenizer's vocabulary as a byte-level BPE
// spells it, with its GGUF token types: the 256 bytes (normal), then
// <bos> and <eos> (control).
func bytesVocab() ([]string, []int32) {
	tokens := make([]string, 0, 258)
	types := make([]int32, 0, 258)
	for b := range 256 {
		tokens = append(tokens, string(byteRunes[b]))
		types = append(types, int32(TokenNormal))
	}
	tokens = append(tokens, "<bos>", "<eos>")
	types = append(types, int32(TokenControl), int32(TokenControl))
	return tokens, types
}

// isBytesGGUF reports whether tokens, types and merges are the byte
// tokenizer's (GGUFMetadata).
func isBytesGGUF(tokens []string, types []int32, merges []string) bool {
	want, wantTypes := bytesVocab()
	return len(merges) == 0 && slices.Equal(tokens, want) && slices.Equal(types, wantTypes)
}

// toByteLevel spells bytes in byte-level BPE characters.
func toByteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteRunes[s[i]])
	}
	return b.String()
}

// ggufVocab returns t's tokens as a GGUF file spells them (ordinary tokens
// in byte-level characters, special and added tokens as their text) and
// their types (bpeType), which NewByteLevelBPE reads.
func (t *BPE) ggufVocab() ([]string, []int32) {
	tokens := make([]string, len(t.tokens))
	types := make([]int32, len(t.tokens))
	for id, tok := range t.tokens {
		typ := t.tokenType(int32(id))
		if tokens[id] = tok; typ == TokenNormal {
			tokens[id] = toByteLevel(tok)
		}
		types[id] = int32(typ)
	}
	return tokens, types
}

// tokenType returns the GGUF type of token id: TokenControl for a special
// token, TokenNormal for an ordinary one, TokenUserDefined for an added
// token matched in all text.
func (t *BPE) tokenType(id int32) TokenType {
	switch vid, ok := t.vocab[t.tokens[id]]; {
	case t.special[id]:
		return TokenControl
	case ok && vid == id:
		return TokenNormal
	}
	return TokenUserDefined
}

// mergeStrings returns t's merges as "left right" in byte-level spelling,
// lowest rank first. Merges of equal rank (a tiktoken vocabulary ranks a
// merge by the token it makes) are ordered by their left and right ids.
func (t *BPE) mergeStrings() []string {
	type merge struct{ rank, a, b uint32 }
	var ms []merge
	t.merges.each(func(key, value uint64) {
		ms = append(ms, merge{uint32(value >> 32), uint32(key >> 32), uint32(key)})
	})
	slices.SortFunc(ms, func(x, y merge) int {
		if c := cmpU32(x.rank, y.rank); c != 0 {
			return c
		}
		if c := cmpU32(x.a, y.a); c != 0 {
			return c
		}
		return cmpU32(x.b, y.b)
	})
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = toByteLevel(t.tokens[m.a]) + " " + toByteLevel(t.tokens[m.b])
	}
	return out
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrNoHFForm is the error of HFFiles for a tokenizer that has no Hugging
// Face form: one of a type it does not know, or a SentencePiece vocabulary
// that a Hugging Face BPE cannot encode with (the error says why).
var ErrNoHFForm = errors.New("no Hugging Face tokenizer files are written for this tokenizer")

// HFFiles returns the Hugging Face tokenizer files that describe tok, by
// name: tokenizer.json (the tokenizers library's format: a BPE model with
// its vocab and merges, the added tokens, the normalizer and
// pre-tokenizer, a post-processor adding BOS, and the decoder),
// tokenizer_config.json (the BOS, EOS and unknown tokens, the chat
// template, PreTrainedTokenizerFast) and special_tokens_map.json. LoadFile
// loads tokenizer.json back as tok.
//
// A SentencePiece vocabulary is written as Hugging Face's converter writes
// Llama's: a BPE of every token with byte fallback to the <0xAB> tokens,
// whose merges are every split of a token into two tokens, ranked by the
// score of the token they make; the normalizer Prepend "▁" and Replace " "
// with "▁" and no pre-tokenizer, so that each run of text between special
// tokens gets its leading space as Encode gives it; and the decoder
// Replace "▁" with " ", ByteFallback, Fuse and Strip one leading space. A
// vocabulary that a BPE cannot encode with as turnwise does gives an error
// wrapping ErrNoHFForm, saying why.
//
// The byte tokenizer's tokenizer.json is a byte-level BPE of the 256
// bytes (each at the id of its value) and no merges, whose pre-tokenizer
// maps the bytes of the text to their characters without splitting it, so
// every byte becomes its own token, with <bos> and <eos> as special added
// tokens. Hugging Face's tools match the text of special tokens in any
// input (apply_chat_template relies on it to read the rendered template),
// as turnwise does with EncodeOptions.AllowSpecial, save that Bytes never
// reads "<bos>" or "<eos>" from text: so a text holding them gives those
// tokens there, and EncodeChat's ids from a rendered byte chat.
func HFFiles(tok Tokenizer) (map[string][]byte, error) {
	var (
		file     hfOut
		bos, eos string
		unk      string
		template string
	)
	switch t := tok.(type) {
	case Bytes:
		tokens, _ := bytesVocab()
		vocab := make(map[string]int32, 256)
		for id, s := range tokens[:256] {
			vocab[s] = int32(id)
		}
		bos, eos, template = "<bos>", "<eos>", ByteChatTemplate
		file = newHFOut(vocab, []string{}, false, []hfAddedOut{
			{ID: BytesBOS, Content: bos, Special: true},
			{ID: BytesEOS, Content: eos, Special: true},
		}, hfByteLevel(false), bos, BytesBOS)
	case *BPE:
		vocab := make(map[string]int32, len(t.vocab))
		for s, id := range t.vocab {
			vocab[toByteLevel(s)] = id
		}
		var added []hfAddedOut
		for id, s := range t.tokens {
			if t.tokenType(int32(id)) != TokenNormal {
				added = append(added, hfAddedOut{ID: int32(id), Content: s, Special: t.special[id]})
			}
		}
		pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
			hfByteLevel(false),
		}}
		bos, eos = t.tokens[t.bos], t.tokens[t.eot]
		if HasChatTokens(t) {
			template = ChatTemplate
		}
		file = newHFOut(vocab, t.mergeStrings(), t.wholePieces, added, pre, bos, t.bos)
	case *SentencePiece:
		var err error
		if file, err = t.hfOut(); err != nil {
			return nil, err
		}
		bos, eos = t.tokens[t.bos], t.tokens[t.eos]
		if t.unk >= 0 {
			unk = t.tokens[t.unk]
		}
	default:
		return nil, fmt.Errorf("tokenizer: %T: %w", tok, ErrNoHFForm)
	}
	js, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{"bos_token": bos, "eos_token": eos, "tokenizer_class": "PreTrainedTokenizerFast",
		"clean_up_tokenization_spaces": false}
	special := map[string]string{"bos_token": bos, "eos_token": eos}
	if template != "" {
		cfg["chat_template"] = template
	}
	if unk != "" {
		cfg["unk_token"], special["unk_token"] = unk, unk
	}
	cfgJS, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	mapJS, err := json.MarshalIndent(special, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"tokenizer.json":          append(js, '\n'),
		"tokenizer_config.json":   append(cfgJS, '\n'),
		"special_tokens_map.json": append(mapJS, '\n'),
	}, nil
}

// hfOut is a tokenizer.json as HFFiles writes it.
type hfOut struct {
	Version       string       `json:"version"`
	Truncation    any          `json:"truncation"`
	Padding       any          `json:"padding"`
	AddedTokens   []hfAddedOut `json:"added_tokens"`
	Normalizer    any          `json:"normalizer"`
	PreTokenizer  any          `json:"pre_tokenizer"`
	PostProcessor any          `json:"post_processor"`
	Decoder       any          `json:"decoder"`
	Model         hfModelOut   `json:"model"`
}

// hfAddedOut is an entry of tokenizer.json's added_tokens.
type hfAddedOut struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfModelOut is tokenizer.json's BPE model.
type hfModelOut struct {
	Type                    string           `json:"type"`
	Dropout                 any              `json:"dropout"`
	UnkToken                any              `json:"unk_token"`
	ContinuingSubwordPrefix any              `json:"continuing_subword_prefix"`
	EndOfWordSuffix         any              `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  any              `json:"merges"` // "left right" strings or [left, right] pairs
}

// hfByteLevel is the ByteLevel pre-tokenizer (or, with useRegex, the
// decoder and post-processor step) of tokenizer.json.
func hfByteLevel(useRegex bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": useRegex, "trim_offsets": true, "use_regex": useRegex}
}

// newHFOut assembles a BPE tokenizer.json with the ByteLevel decoder and
// no normalizer, whose post-processor puts the token bos (id bosID) in
// front of each sequence.
func newHFOut(vocab map[string]int32, merges any, ignoreMerges bool, added []hfAddedOut, pre any, bos string, bosID int32) hfOut {
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	special := func(typ int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": typ}}
	}
	post := map[string]any{
		"type":   "TemplateProcessing",
		"single": []any{special(0), seq("A", 0)},
		"pair":   []any{special(0), seq("A", 0), special(1), seq("B", 1)},
		"special_tokens": map[string]any{
			bos: map[string]any{"id": bos, "ids": []int32{bosID}, "tokens": []string{bos}},
		},
	}
	return hfOut{
		Version: "1.0", AddedTokens: added, PreTokenizer: pre, PostProcessor: post, Decoder: hfByteLevel(true),
		Model: hfModelOut{Type: "BPE", IgnoreMerges: ignoreMerges, Vocab: vocab, Merges: merges},
	}
}

// LoadFile reads the tokenizer file at path: the byte tokenizer's
// tokenizer.json (HFFiles) as Bytes; a SentencePiece vocabulary's
// tokenizer.json (a BPE with byte_fallback, as HFFiles and Hugging Face's
// converter for Llama write it) as a SentencePiece, whose EOS token is the
// eos_token of tokenizer_config.json beside the file, if it names one, else
// </s>; any other as Load does.
func LoadFile(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		if ok, err := isBytesJSON(data); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		} else if ok {
			return Bytes{}, nil
		}
		if isSentencePieceJSON(data) {
			eos, err := hfConfigEOS(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
			if err != nil {
				return nil, err
			}
			return parseSentencePieceJSON(path, data, eos)
		}
	}
	return Load(path)
}

// isBytesJSON reports whether the tokenizer.json data describes the byte
// tokenizer: a BPE of the 256 single bytes at the ids of their values and
// no merges. Such a model with other added tokens, a normalizer, or a
// pre-tokenizer or decoder other than ByteLevel is an error saying so.
func isBytesJSON(data []byte) (bool, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return false, nil // Load reports it
	}
	m := f.Model
	if m == nil || m.Type != "BPE" || len(m.Vocab) != 256 {
		return false, nil
	}
	var merges []json.RawMessage
	if json.Unmarshal(m.Merges, &merges) != nil || len(merges) != 0 {
		return false, nil
	}
	for b := range 256 {
		if id, ok := m.Vocab[string(byteRunes[b])]; !ok || id != int64(b) {
			return false, nil
		}
	}
	const what = "a vocabulary of the 256 bytes without merges is the byte tokenizer's"
	switch {
	case m.ByteFallback || m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return false, fmt.Errorf("%s, but byte_fallback, continuing_subword_prefix or end_of_word_suffix is set", what)
	case len(f.Normalizer) > 0 && string(f.Normalizer) != "null":
		return false, fmt.Errorf("%s, but it has a normalizer", what)
	case f.PreTokenizer == nil || f.PreTokenizer.Type != "ByteLevel" || f.PreTokenizer.AddPrefixSpace:
		return false, fmt.Errorf("%s, but its pre_tokenizer is not ByteLevel without add_prefix_space", what)
	case f.Decoder == nil || f.Decoder.Type != "ByteLevel":
		return false, fmt.Errorf("%s, but its decoder is not ByteLevel", what)
	}
	want := map[int64]string{int64(BytesBOS): "<bos>", int64(BytesEOS): "<eos>"}
	if len(f.AddedTokens) != len(want) {
		return false, fmt.Errorf("%s, but it has %d added tokens, want <bos> (256) and <eos> (257)", what, len(f.AddedTokens))
	}
	for _, a := range f.AddedTokens {
		if a.ID == nil || want[*a.ID] != a.Content || !a.Special {
			return false, fmt.Errorf("%s, but added token %q is not the special <bos> (256) or <eos> (257)", what, a.Content)
		}
	}
	return true, nil
}
