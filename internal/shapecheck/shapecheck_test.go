package shapecheck

import "testing"

func TestBlame(t *testing.T) {
	want := []Extent{{128, "vocab_size"}, {64, "hidden_size"}}
	tests := []struct {
		name string
		got  []int
		out  string
	}{
		{"equal", []int{128, 64}, ""},
		{"second", []int{128, 32}, "hidden_size gives 64 where the tensor has 32"},
		{"both", []int{100, 32}, "vocab_size gives 128 where the tensor has 100, hidden_size gives 64 where the tensor has 32"},
		{"rank", []int{8192}, "vocab_size gives 128, hidden_size gives 64"},
		{"scalar", nil, "vocab_size gives 128, hidden_size gives 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Blame(want, tt.got); got != tt.out {
				t.Errorf("Blame(%v, %v) = %q, want %q", want, tt.got, got, tt.out)
			}
		})
	}
}

func TestLayers(t *testing.T) {
	tests := []struct {
		name   string
		names  []string
		prefix string
		want   int
	}{
		{"none", nil, "blk.", 0},
		{"hf", []string{"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.input_layernorm.weight", "model.layers.7.mlp.up_proj.weight"}, "model.layers.", 2},
		{"gguf", []string{"blk.0.attn_q.weight", "blk.1.attn_q.weight", "blk.2.ffn_up.weight", "output.weight"}, "blk.", 3},
		{"not indices", []string{"blk.x.attn_q.weight", "blk.-1.attn_q.weight", "blk.3", "blk.", "blk.+4.a"}, "blk.", 1},
		{"other prefix", []string{"vision_model.encoder.layers.0.mlp.fc1.weight"}, "model.layers.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Layers(tt.names, tt.prefix); got != tt.want {
				t.Errorf("Layers(%q, %q) = %d, want %d", tt.names, tt.prefix, got, tt.want)
			}
		})
	}
}
