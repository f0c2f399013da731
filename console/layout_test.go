package console

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/console/components"
)

// TestOverviewSaysWhichLayoutRuns: the Overview names the engines'
// layout and why it was chosen, and says nothing of one it was not told.
func TestOverviewSaysWhichLayoutRuns(t *testing.T) {
	t.Parallel()
	render := func(cfg Config) string {
		s := newSampler(cfg, Deps{Engines: &fakeSources{engines: []Engine{{Worker: "a", Node: "rig0", TotalBlocks: 100}}}})
		var buf bytes.Buffer
		if err := components.OverviewBody(overviewVM(cfg, s.collect(context.Background(), t0, false))).Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	cfg := testConfig()
	cfg.Layout, cfg.LayoutReason = "tp2, fp8 KV, yarn", "for coding agents, a 131,072-token context per session"
	if page := render(cfg); !strings.Contains(page, `id="layout"`) || !strings.Contains(page, "<strong>tp2, fp8 KV, yarn</strong>, for coding agents, a 131,072-token context") {
		t.Errorf("the Overview does not say the layout:\n%s", page)
	}
	if page := render(testConfig()); strings.Contains(page, `id="layout"`) {
		t.Error("a layout shown that the console was not told")
	}
}
