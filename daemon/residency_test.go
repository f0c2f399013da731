package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/models"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// fakeEngines plays the supervisor for the mover: one ready engine per
// name, held ones stopped.
type fakeEngines struct {
	mu     sync.Mutex
	states map[string]hruntime.Status
	holds  []string
}

func (f *fakeEngines) Engines() []hruntime.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hruntime.Status
	for _, st := range f.states {
		out = append(out, st)
	}
	return out
}

func (f *fakeEngines) Hold(name, reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[name]
	st.State, st.LastError = hruntime.StateStopped, reason
	f.states[name] = st
	f.holds = append(f.holds, name)
	return true
}

func (f *fakeEngines) Release(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[name]
	st.State = hruntime.StateReady
	f.states[name] = st
	return true
}

// TestSleepThatKeepsTheMemoryStops is the engine that lies: it answers its
// sleep but the GPU telemetry still shows its memory. The mover says the
// sleep failed, and the manager stops the engine instead, so that the
// other model finds the GPU free; an engine whose memory does come back
// sleeps.
func TestSleepThatKeepsTheMemoryStops(t *testing.T) {
	const awake, residual = 21 << 30, 1 << 29
	for _, tc := range []struct {
		name      string
		asleepMem uint64
		wantState models.State
		wantHeld  bool
	}{
		{"memory back", residual, models.Sleeping, false},
		{"memory kept", awake, models.OnDisk, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			used := uint64(awake)
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.URL.Path {
				case "/sleep":
					used = tc.asleepMem
				case "/metrics":
					fmt.Fprintf(w, "# TYPE %s gauge\n%s %d\n", simGPUMemoryMetric, simGPUMemoryMetric, used)
				}
			}))
			defer engine.Close()
			spec := hruntime.Spec{Name: "sim/gpu0/a", Model: "a", Engine: hruntime.KindVLLM, Simulated: true}
			sup := &fakeEngines{states: map[string]hruntime.Status{
				spec.Name: {Name: spec.Name, Model: "a", State: hruntime.StateReady, BaseURL: engine.URL},
			}}
			mv := &engineMover{sup: sup, client: engine.Client(), specs: map[string]hruntime.Spec{"a": spec},
				bytes: map[string]uint64{"a": awake}, level: map[string]int{"a": 1}, log: slog.New(slog.DiscardHandler)}
			m, err := models.New(models.Options{Capacity: 24 << 30, Mover: mv, Models: []models.Model{{Name: "a", Bytes: awake, CanSleep: true}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Load(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			if err := m.Unload(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			if st := m.Statuses()[0].State; st != tc.wantState {
				t.Errorf("after the sleep the model is %s, want %s", st, tc.wantState)
			}
			if held := slices.Contains(sup.holds, spec.Name); held != tc.wantHeld {
				t.Errorf("engine stopped: %v, want %v", held, tc.wantHeld)
			}
		})
	}
}
