package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
)

// TestModelTableShowsGPUShareAndLastMove: hearth models shows each model's
// GPU, its share of it, and its engine's latest move with its time.
func TestModelTableShowsGPUShareAndLastMove(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 55, 2, 0, time.UTC)
	var b strings.Builder
	err := WriteModelTable(&b, []adminapi.Model{
		{Name: "qwen3-4b-fp8", State: "resident", GPU: "n/gpu0", Share: 0.29, Last: &adminapi.ModelTransition{Kind: "load", At: at, TookMS: 20400}},
		{Name: "qwen3-8b-fp8", State: "sleeping", GPU: "n/gpu0", Share: 0.61, Last: &adminapi.ModelTransition{Kind: "sleep", At: at, Error: "refused"}},
		{Name: "qwen3-14b-fp8", State: "on disk"},
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := at.Local().Format("15:04:05")
	for _, want := range []string{"MODEL", "GPU", "SHARE", "LAST", "n/gpu0", "29%", "load " + clock + ", 20.4 s", "sleep " + clock + ", failed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// Scripts (and the end-to-end tests) read a model's state as the
	// second field of its row.
	if f := strings.Fields(strings.Split(b.String(), "\n")[1]); f[0] != "qwen3-4b-fp8" || f[1] != "resident" {
		t.Errorf("row %q: want the model's name and then its state", f)
	}
	if row := strings.Split(strings.TrimSpace(b.String()), "\n")[3]; strings.Count(row, " - ") < 2 {
		t.Errorf("a model never moved shows %q, want dashes for its GPU, share and last move", row)
	}
}
