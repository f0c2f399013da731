package daemon

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/cluster"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

func TestAdminEngineCarriesPhaseProgressAndCause(t *testing.T) {
	cases := []struct {
		name string
		st   hruntime.Status
		want map[string]any // keys that must be there; nil values must be absent
	}{
		{"loading with a percentage", hruntime.Status{State: hruntime.StateLoading, Load: hruntime.LoadState{Phase: hruntime.PhaseCapturing, Progress: 40}},
			map[string]any{"phase": "capturing", "progress": 40.0, "cause": nil}},
		{"loading at 0%", hruntime.Status{State: hruntime.StateLoading, Load: hruntime.LoadState{Phase: hruntime.PhaseLoading, Progress: 0}},
			map[string]any{"phase": "loading", "progress": 0.0}},
		{"loading, no figure", hruntime.Status{State: hruntime.StateLoading, Load: hruntime.LoadState{Phase: hruntime.PhaseCompiling, Progress: -1}},
			map[string]any{"phase": "compiling", "progress": nil}},
		{"failed", hruntime.Status{State: hruntime.StateFailed, Load: hruntime.LoadState{Progress: -1},
			LastError: "exited: exit status 1: CUDA ran out of memory: lower --max-model-len or use a smaller model",
			Diagnosis: hruntime.Diagnosis{Cause: hruntime.CauseOutOfMemory, Message: "CUDA ran out of memory: lower --max-model-len or use a smaller model"}},
			map[string]any{"phase": nil, "progress": nil, "cause": "out_of_memory", "last_error": "exited: exit status 1: CUDA ran out of memory: lower --max-model-len or use a smaller model"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(adminEngineOf(tc.st))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				v, ok := got[k]
				switch {
				case want == nil && ok:
					t.Errorf("%s: %v, want it left out", k, v)
				case want != nil && v != want:
					t.Errorf("%s: %v, want %v", k, v, want)
				}
			}
		})
	}
}

// TestSessionsJSON: the JSON view of a recorded session, with a side
// request, a turn that lost its cache on another worker and one whose
// prompt changed.
func TestSessionsJSON(t *testing.T) {
	traffic := api.NewTraffic(api.TrafficLimits{})
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	rec := func(sec int, kind api.RequestKind, worker string, hashes []tokenizer.SeqHash, prompt, cached int) {
		at := t0.Add(time.Duration(sec) * time.Second)
		traffic.Record(api.RequestRecord{ID: "r", At: at, SessionID: "s1", Client: "claude-code", Kind: kind, Worker: worker,
			PromptTokens: prompt, CachedTokens: cached, CacheReported: true, OutputTokens: 7}, nil, hashes, at.Add(time.Second))
	}
	rec(0, api.KindSide, "w1", []tokenizer.SeqHash{9}, 20, 0)
	rec(1, api.KindTurn, "w1", []tokenizer.SeqHash{1, 2}, 40, 0)
	rec(2, api.KindTurn, "w2", []tokenizer.SeqHash{1, 2, 3}, 50, 0)
	rec(3, api.KindTurn, "w2", []tokenizer.SeqHash{1, 5, 6, 7}, 70, 16)
	app := fiber.New()
	open := func(c *fiber.Ctx) error { return c.Next() }
	adminapi.Mount(app, open, adminapi.Sources{Sessions: sessionAdmin{traffic: traffic, decode: func([]uint32) string { return "" }}})
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/api/v1/sessions", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	checkGolden(t, filepath.Join("testdata", "sessions.json"), indentJSON(t, got))
}

func indentJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out) + "\n"
}

// TestNodeEngineKeepsEveryFieldOfTheHeartbeat: GET /api/v1/nodes shows a
// peer's engine as its heartbeat carries it, every field included.
func TestNodeEngineKeepsEveryFieldOfTheHeartbeat(t *testing.T) {
	e := cluster.EngineInfo{
		Name: "b/gpu0", Model: "m", Incarnation: "i1", URL: "https://10.0.0.2:7443/engines/gpu0", CapacityBlocks: 100,
		RAMCapacityBlocks: 200, BlockBytes: 4096, PrefillTokensPerSec: 1.5, LoadBytesPerSec: 2.5, Approximate: true,
		Running: 3, State: "ready",
	}
	want, _ := json.Marshal(e)
	got, _ := json.Marshal(nodeEngineOf(e))
	if string(got) != string(want) {
		t.Errorf("the API's engine of a node:\n%s\nthe heartbeat's:\n%s", got, want)
	}
	g := cluster.GPUInfo{Index: 1, Name: "RTX 4090", MemoryMiB: 24564}
	wantGPU, _ := json.Marshal(g)
	gotGPU, _ := json.Marshal(nodeGPUOf(g))
	if string(gotGPU) != string(wantGPU) {
		t.Errorf("the API's GPU of a node: %s, the heartbeat's: %s", gotGPU, wantGPU)
	}
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares out with the golden file at path (-update rewrites
// it).
func checkGolden(t *testing.T, path, out string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -run %s -update rewrites it):\n%s", path, t.Name(), out)
	}
}
