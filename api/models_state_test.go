package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// loadingResidency has one model loading, 3 s into an expected 12 s.
type loadingResidency struct{}

func (loadingResidency) ModelState(string) string { return "loading" }
func (loadingResidency) ModelLoad(string) (time.Duration, time.Duration) {
	return 3 * time.Second, 12 * time.Second
}
func (loadingResidency) ToolPause(string, string) {}

// TestModelsListShowsLoadProgress: /v1/models gives a loading model's
// state and how far its load is.
func TestModelsListShowsLoadProgress(t *testing.T) {
	t.Parallel()
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Residency = loadingResidency{} })
	resp, err := http.Get(h.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			Loading *struct {
				Elapsed  float64 `json:"elapsed_seconds"`
				Expected float64 `json:"expected_seconds"`
				Progress float64 `json:"progress"`
			} `json:"loading"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 {
		t.Fatalf("%d models listed, want 1", len(list.Data))
	}
	m := list.Data[0]
	if m.State != "loading" || m.Loading == nil || m.Loading.Elapsed != 3 || m.Loading.Expected != 12 || m.Loading.Progress != 0.25 {
		t.Errorf("model %s: state %q, loading %+v; want loading, 3 of 12 s, progress 0.25", m.ID, m.State, m.Loading)
	}
}

// TestModelLoadProgressStaysBelowDone: a load that overruns its estimate
// is not reported done.
func TestModelLoadProgressStaysBelowDone(t *testing.T) {
	t.Parallel()
	if p := newModelLoad(20*time.Second, 12*time.Second).Progress; p >= 1 {
		t.Errorf("progress %v past the estimate, want below 1", p)
	}
	if p := newModelLoad(20*time.Second, 0).Progress; p != 0 {
		t.Errorf("progress %v without an estimate, want 0", p)
	}
}
