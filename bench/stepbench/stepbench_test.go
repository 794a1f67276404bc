package stepbench

import (
	"testing"

	"github.com/turnwise/turnwise/model/llama"
)

func TestFLOPsPerToken(t *testing.T) {
	c, err := llama.Preset("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	// N = 32·(2·4096² + 2·4096·1024 + 3·4096·14336) + 128256·4096 = 7 504 658 432;
	// N_lora = 41 943 040; attention 6·32·32·128·2048 = 1 610 612 736.
	got, how := FLOPsPerToken(c, 16, 2048)
	if want := 4*7504658432.0 + 6*41943040.0 + 1610612736.0; got != want {
		t.Errorf("FLOPs per token %v, want %v", got, want)
	}
	if how == "" {
		t.Error("no description of the count")
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StepName("llama-3.1-8b", 8192, 16, true), "lora_step/llama-3.1-8b/T8192/r16/recompute"},
		{StepName("tiny", 32, 4, false), "lora_step/tiny/T32/r4"},
		{GenerationName("prefill", "llama-3.1-8b", 16, 512, 64), "prefill/llama-3.1-8b/b16/p512"},
		{GenerationName("decode", "llama-3.1-8b", 1, 512, 64), "decode/llama-3.1-8b/b1/p512/n64"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
