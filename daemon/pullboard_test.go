package daemon

import (
	"log/slog"
	"strings"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

func TestProgressBar(t *testing.T) {
	bar := progressBar(docker.PullProgress{Layers: 7, Done: 3, Current: 45, Total: 100})
	if !strings.HasPrefix(bar, "[#########-----------]") || !strings.Contains(bar, "45% 3/7 layers") {
		t.Errorf("bar = %q", bar)
	}
	if bar := progressBar(docker.PullProgress{Layers: 2}); !strings.Contains(bar, "  0% 0/2") {
		t.Errorf("no sizes yet: %q", bar)
	}
}

// TestPullShowsAsTheStartingEnginesPhase: while an engine's image is
// pulled, its status (what the engines API and the console show) is the
// pull and its percentage; once every layer is in, the engine's own log
// tells its phase again.
func TestPullShowsAsTheStartingEnginesPhase(t *testing.T) {
	b := newPullBoard(nil, slog.New(slog.DiscardHandler))
	b.set("rig/gpu0", docker.PullProgress{Image: "vllm/vllm-openai:v0.20.0", Layers: 4, Done: 1, Current: 300, Total: 1000})
	got := b.annotate([]hruntime.Status{
		{Name: "rig/gpu0", State: hruntime.StateStarting},
		{Name: "rig/gpu1", State: hruntime.StateStarting},
	})
	if got[0].Load.Phase != hruntime.PhasePulling || got[0].Load.Progress != 30 {
		t.Errorf("pulling engine: %+v, want pulling 30%%", got[0].Load)
	}
	if got[1].Load.Phase != "" {
		t.Errorf("an engine that pulls nothing shows %+v", got[1].Load)
	}
	j := adminEngineOf(got[0])
	if j.Phase != "pulling" || j.Progress == nil || *j.Progress != 30 {
		t.Errorf("engines API: phase %q progress %v", j.Phase, j.Progress)
	}

	b.set("rig/gpu0", docker.PullProgress{Layers: 4, Done: 4, Current: 1000, Total: 1000})
	if got := b.annotate([]hruntime.Status{{Name: "rig/gpu0", State: hruntime.StateStarting}}); got[0].Load.Phase != "" {
		t.Errorf("a finished pull still shows: %+v", got[0].Load)
	}
}
