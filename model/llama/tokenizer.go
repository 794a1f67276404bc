package llama

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/tokenizer"
)

// LoadTokenizer opens a tokenizer file: a Llama 3 tokenizer.json or
// tokenizer.model, the byte tokenizer's tokenizer.json, or a SentencePiece
// vocabulary's tokenizer.json as Hugging Face writes Llama 2's
// (tokenizer.LoadFile), or a GGUF model file whose metadata holds the
// vocabulary, told apart by its magic bytes.
func LoadTokenizer(path string) (tokenizer.Tokenizer, error) {
	isGGUF, err := hasGGUFMagic(path)
	if err != nil {
		return nil, err
	}
	if !isGGUF {
		return tokenizer.LoadFile(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUFMetadata(f.Meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// hasGGUFMagic reports whether the file at path starts with GGUF's magic.
func hasGGUFMagic(path string) (bool, error) {
	fd, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("opening tokenizer: %w", err)
	}
	defer fd.Close()
	var magic [4]byte
	n, _ := io.ReadFull(fd, magic[:])
	return n == 4 && string(magic[:]) == gguf.Magic, nil
}

// ErrNoTokenizer is the error of Source.Tokenizer for a source that
// carries no tokenizer (a preset) when none is named.
var ErrNoTokenizer = errors.New("no tokenizer")

// Tokenizer finds the tokenizer of the model s names: the file at path
// when path is given ("bytes": the byte tokenizer), else the GGUF file's
// metadata, else tokenizer.json in the Hugging Face directory — or, when
// the directory has none and the model's vocabulary is the byte
// tokenizer's, the byte tokenizer (a model trained from scratch). A preset
// has none (ErrNoTokenizer).
func (s Source) Tokenizer(path string) (tokenizer.Tokenizer, error) {
	switch {
	case path == "bytes":
		return tokenizer.Bytes{}, nil
	case path != "":
		return LoadTokenizer(path)
	case s.GGUF != "":
		return LoadTokenizer(s.GGUF)
	case s.HF != "":
		file := filepath.Join(s.HF, "tokenizer.json")
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			if c, cerr := LoadHFConfig(filepath.Join(s.HF, HFConfigName)); cerr == nil && c.Vocab == (tokenizer.Bytes{}).VocabSize() {
				return tokenizer.Bytes{}, nil
			}
		}
		return LoadTokenizer(file)
	}
	return nil, ErrNoTokenizer
}
