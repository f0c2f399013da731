package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func hotPromptOf(task uint32) []uint32 {
	p := make([]uint32, 2048+15)
	for i := range 2048 {
		p[i] = uint32(i)
	}
	for i := 2048; i < len(p); i++ {
		p[i] = 100_000 + task*100 + uint32(i)
	}
	return p
}

// The hot prefixes one start learns are those the next start reads; a
// damaged file is learned anew.
func TestHotPrefixesSurviveARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hot-prefixes")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	first := loadHotPrefixes(path, log)
	first.ObserveFirstPrompt("m", hotPromptOf(1))
	if _, err := os.Stat(path); err == nil {
		t.Fatal("one session's prompt was saved as a hot prefix")
	}
	first.ObserveFirstPrompt("m", hotPromptOf(2))
	want := first.Hot("m")
	if len(want) != 1 || len(want[0]) != 2048 {
		t.Fatalf("learned %d prefixes, want the 2,048 shared tokens", len(want))
	}
	second := loadHotPrefixes(path, log)
	if got := second.Hot("m"); len(got) != 1 || !slices.Equal(got[0], want[0]) {
		t.Fatalf("the next start read %d prefixes, want what the first learned", len(got))
	}
	if err := os.WriteFile(path, []byte("HWRM\x01\x05garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := loadHotPrefixes(path, log).Hot("m"); len(got) != 0 {
		t.Errorf("a damaged file gave %d prefixes", len(got))
	}
}

// setWarm warms the engines already in service, and Attach those after.
func TestFleetWarmsEnginesInService(t *testing.T) {
	f := newFleet(nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.live["e1"] = &liveEngine{ctx: ctx, baseURL: "http://127.0.0.1:1", model: "m"}
	warmed := make(chan string, 1)
	f.setWarm(func(_ context.Context, baseURL, model string) (int, error) {
		warmed <- baseURL + " " + model
		return 1, nil
	})
	if got := <-warmed; got != "http://127.0.0.1:1 m" {
		t.Errorf("warmed %q", got)
	}
}
