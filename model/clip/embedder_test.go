package clip_test

import (
	"github.com/turnwise/turnwise/model/clip"
	"github.com/turnwise/turnwise/sweetrl/frontend"
)

// The tower is what the frontend tasks' scorer embeds screenshots with.
var _ frontend.Embedder = (*clip.Model)(nil)
