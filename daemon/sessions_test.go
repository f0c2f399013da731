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

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/tokenizer"
)

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
	app.Get("/api/v1/sessions", sessionsHandler(traffic, func([]uint32) string { return "" }))
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
