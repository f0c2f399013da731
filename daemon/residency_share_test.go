package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestSmallModelBesideLargeNeedsNoSwap: two models on one simulated 4090
// that fit together (their planned memory fractions sum within the GPU)
// are resident at once, so a request for the small one sleeps nothing
// while the large one stays resident; a pair that does not fit still
// swaps: the resident model sleeps for the other.
func TestSmallModelBesideLargeNeedsNoSwap(t *testing.T) {
	gpus := []nodes.GPU{{Index: 0, Kind: "rtx4090", Node: "n"}}
	for _, tc := range []struct {
		name         string
		large, small string
		together     bool
	}{
		{"fit together", "qwen3-8b-fp8", "qwen3-4b-fp8", true},
		{"do not fit", "qwen3-14b-fp8", "qwen3-8b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Models: []string{tc.large, tc.small}, EngineRuntime: RuntimeSim, OnDemand: OnDemandConfig{Wait: 10 * time.Second}}
			specs, notes, err := planEngines(cfg, gpus)
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for _, s := range specs {
				if s.GPUMemoryUtilization <= 0 {
					t.Fatalf("%s has no memory fraction", s.Name)
				}
				sum += s.GPUMemoryUtilization
			}
			if fits := sum <= 0.9+1e-9; fits != tc.together {
				t.Errorf("fractions sum to %.2f: fit together %v, want %v", sum, fits, tc.together)
			}
			if noted := strings.Contains(notes[specs[0].Name], "resident beside "+tc.small); noted != tc.together {
				t.Errorf("plan note %q: says it shares the GPU %v, want %v", notes[specs[0].Name], noted, tc.together)
			}

			var sleeps atomic.Int32
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/sleep" {
					sleeps.Add(1)
				}
			}))
			defer engine.Close()
			sup := &fakeEngines{states: map[string]hruntime.Status{}}
			for _, s := range specs {
				sup.states[s.Name] = hruntime.Status{Name: s.Name, Model: s.Model, State: hruntime.StateReady, BaseURL: engine.URL}
			}
			r, err := newResidency(cfg, gpus, specs, sup, nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, model := range []string{tc.large, tc.small} {
				release, err := r.acquire(ctx, models.Request{Model: model})
				if err != nil {
					t.Fatalf("%s: %v", model, err)
				}
				release()
			}
			wantLarge := models.Sleeping
			if tc.together {
				wantLarge = models.Resident
			}
			if got := models.State(r.ModelState(tc.large)); got != wantLarge {
				t.Errorf("after a request for %s, %s is %s, want %s", tc.small, tc.large, got, wantLarge)
			}
			if got := models.State(r.ModelState(tc.small)); got != models.Resident {
				t.Errorf("%s is %s, want resident", tc.small, got)
			}
			if n := sleeps.Load(); (n == 0) != tc.together {
				t.Errorf("%d sleeps; want none only when the models fit together", n)
			}

			// A simulated GPU's card shows each engine reserving its share.
			fractions := sharedFractions(r, specs)
			for _, s := range specs {
				if fractions[s.Name] != s.GPUMemoryUtilization {
					t.Errorf("%s: the card's fraction %.2f, want its planned %.2f", s.Name, fractions[s.Name], s.GPUMemoryUtilization)
				}
			}

			// The console's view: both models on the GPU with their
			// shares, and the moves that brought them in.
			view, err := r.Residency(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range view.Models {
				if m.GPU != "n/gpu0" || m.Share <= 0 {
					t.Errorf("console model %+v, want GPU n/gpu0 and its share", m)
				}
			}
			var kinds []string
			for _, tr := range view.Transitions {
				kinds = append(kinds, tr.Kind+" "+tr.Model)
			}
			want := []string{"load " + tc.large, "load " + tc.small}
			if !tc.together {
				want = []string{"load " + tc.large, "sleep " + tc.large, "load " + tc.small}
			}
			if !slices.Equal(kinds, want) {
				t.Errorf("timeline %q, want %q", kinds, want)
			}
		})
	}
}
