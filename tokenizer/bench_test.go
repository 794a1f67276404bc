package tokenizer

import (
	"os"
	"testing"
)

// BenchmarkEncode measures encoding throughput of the Llama 3 tokenizer on
// mixed text (bench/tokenizer compares it with tiktoken).
func BenchmarkEncode(b *testing.B) {
	tok := loadLlama3(b)
	text := randomText(1, 4<<20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, EncodeOptions{})
	}
}

// BenchmarkEncodeFile encodes the file named by $TURNWISE_BENCH_TEXT.
func BenchmarkEncodeFile(b *testing.B) {
	path := os.Getenv("TURNWISE_BENCH_TEXT")
	if path == "" {
		b.Skip("set TURNWISE_BENCH_TEXT to a text file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	tok := loadLlama3(b)
	text := string(data)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, EncodeOptions{})
	}
}
