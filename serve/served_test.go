package serve_test

import (
	"testing"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/serve"
)

func TestServedModels(t *testing.T) {
	m := tinyModel(t)
	ad, err := m.NewAdapter(llama.LoRAEvery(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, base, id, dir string
		ad                  *llama.Adapter
		want                []string // ids; the first serves ad when there is one
	}{
		{"base", "stories", "", "", nil, []string{"stories"}},
		{"base renamed", "stories", "mine", "", nil, []string{"mine"}},
		{"adapter named by its directory", "stories", "", "runs/actor/", ad, []string{"actor", "stories"}},
		{"adapter named", "stories", "sweet", "runs/actor", ad, []string{"sweet", "stories"}},
	}
	for _, c := range cases {
		got := serve.ServedModels(c.base, c.id, c.ad, c.dir)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d models, want %d", c.name, len(got), len(c.want))
		}
		for i, s := range got {
			wantAd := c.ad != nil && i == 0
			if s.ID != c.want[i] || (s.Adapter != nil) != wantAd {
				t.Errorf("%s: model %d is %q (adapter %v), want %q (adapter %v)", c.name, i, s.ID, s.Adapter != nil, c.want[i], wantAd)
			}
		}
	}
}
