package sweetrl

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHTTPSimulatorCheck(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more
	tests := []struct {
		name    string
		url     string // "" for the scripted server's
		reply   reply
		wantErr string // "" for none
	}{
		{"answers", "", reply{status: 200, body: okBody("ready")}, ""},
		{"answers with empty content", "", reply{status: 200, body: okBody("")}, ""},
		{"nothing listens", closed.URL, reply{}, "does not answer"},
		{"wrong model", "", reply{status: 404, body: `{"error": {"message": "model sim-model does not exist"}}`}, "404"},
		{"overloaded", "", reply{status: 503, body: "busy"}, "503"},
		{"not a chat completion", "", reply{status: 200, body: `{"data": []}`}, "no choices"},
		{"hangs", "", reply{sleep: 5 * time.Second}, "does not answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.reply)
			url := srv.URL
			if tc.url != "" {
				url = tc.url
			}
			cfg := fastConfig(url)
			cfg.Timeout = 200 * time.Millisecond
			sim := newSim(t, cfg)
			err := sim.Check(context.Background())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), url+"/v1/chat/completions") {
				t.Fatalf("Check: %v; want an error naming %s/v1/chat/completions and %q", err, url, tc.wantErr)
			}
			if tc.reply.sleep > 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Check against a server that hangs: %v; want it to give up at its request timeout", err)
			}
			if tc.url == "" && srv.requests.Load() != 1 {
				t.Errorf("Check sent %d requests, want 1 (no retries)", srv.requests.Load())
			}
			if sim.Failures() != 0 || sim.Retries() != 0 {
				t.Errorf("Check counted %d failures and %d retries; it must count neither", sim.Failures(), sim.Retries())
			}
		})
	}
}

// TestHTTPSimulatorMaxFailures checks that after MaxFailures failed calls
// Respond returns an error instead of NoResponse, and then fails every
// later call at once, without a request.
func TestHTTPSimulatorMaxFailures(t *testing.T) {
	srv := newScriptServer(t, reply{status: 500, body: "down"})
	cfg := fastConfig(srv.URL)
	cfg.MaxRetries, cfg.MaxFailures = -1, 3
	sim := newSim(t, cfg)
	for call := 1; call <= 2; call++ {
		if got, err := sim.Respond(context.Background(), simTask, simHistory); err != nil || got != NoResponse {
			t.Fatalf("call %d: %q, %v; want NoResponse below the limit", call, got, err)
		}
	}
	_, err := sim.Respond(context.Background(), simTask, simHistory)
	if !errors.Is(err, ErrSimulatorFailing) || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "3 calls") || !strings.Contains(err.Error(), "500") {
		t.Fatalf("third failed call: %v; want ErrSimulatorFailing naming the endpoint, the count and the last error", err)
	}
	sent := srv.requests.Load()
	if _, err := sim.Respond(context.Background(), simTask, simHistory); !errors.Is(err, ErrSimulatorFailing) || srv.requests.Load() != sent {
		t.Errorf("a call after the limit: %v, %d more requests; want the error and no request", err, srv.requests.Load()-sent)
	}

	// No limit: every failed call answers NoResponse.
	cfg.MaxFailures = 0
	sim = newSim(t, cfg)
	for call := 1; call <= 5; call++ {
		if got, err := sim.Respond(context.Background(), simTask, simHistory); err != nil || got != NoResponse {
			t.Fatalf("no limit, call %d: %q, %v", call, got, err)
		}
	}
	cfg.MaxFailures = -1
	if _, err := NewHTTPSimulator(cfg); err == nil {
		t.Error("a negative MaxFailures was accepted")
	}
}
