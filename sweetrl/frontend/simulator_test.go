package frontend

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

// TestHTTPSimulator checks the request the vision simulator sends: the
// reference's token limit, temperature 0, and one user message of the
// instructions and both screenshots.
func TestHTTPSimulator(t *testing.T) {
	var got struct {
		Model       string  `json:"model"`
		Temperature float64 `json:"temperature"`
		MaxTokens   int     `json:"max_tokens"`
		Messages    []struct {
			Role    string                `json:"role"`
			Content []sweetrl.ContentPart `json:"content"`
		} `json:"messages"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding the request: %v", err)
		}
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"Centre the title."}}]}`)
	}))
	defer srv.Close()
	sim, err := NewHTTPSimulator(sweetrl.HTTPSimulatorConfig{BaseURL: srv.URL, Model: "vision"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sim.Respond(context.Background(), []byte("agent"), []byte("target"))
	if err != nil || reply != "Centre the title." {
		t.Fatalf("Respond = %q, %v", reply, err)
	}
	if got.Model != "vision" || got.Temperature != 0 || got.MaxTokens != SimulatorMaxTokens {
		t.Errorf("model %q, temperature %v, max_tokens %d", got.Model, got.Temperature, got.MaxTokens)
	}
	if len(got.Messages) != 1 || got.Messages[0].Role != "user" {
		t.Fatalf("messages = %+v, want one user message", got.Messages)
	}
	parts := got.Messages[0].Content
	want := SimulatorParts([]byte("agent"), []byte("target"))
	if len(parts) != len(want) {
		t.Fatalf("%d parts, want %d", len(parts), len(want))
	}
	for i := range want {
		if parts[i].Type != want[i].Type || parts[i].Text != want[i].Text ||
			(want[i].ImageURL != nil && (parts[i].ImageURL == nil || parts[i].ImageURL.URL != want[i].ImageURL.URL)) {
			t.Errorf("part %d = %+v, want %+v", i, parts[i], want[i])
		}
	}
}
