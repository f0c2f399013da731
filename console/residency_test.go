package console

import (
	"testing"
	"time"
)

// TestModelsTimelineNewestFirstAndBounded: the timeline lists the latest
// TransitionsShown transitions whatever order the source gives them in,
// newest first, and the longest one's bar fills its box.
func TestModelsTimelineNewestFirstAndBounded(t *testing.T) {
	cfg := Config{Location: time.UTC}
	cfg.setDefaults()
	var r Residency
	for i := range 20 {
		// Given oldest last, to show the order is the console's.
		r.Transitions = append(r.Transitions, ModelTransition{Model: "m", GPU: "ws/gpu0", Kind: TransitionWake,
			At: t0.Add(-time.Duration(i) * time.Minute), Took: time.Duration(i+1) * time.Second})
	}
	p := modelsVM(cfg, &snapshot{residency: r})
	if !p.Shown {
		t.Fatal("the panel is hidden with transitions to show")
	}
	if len(p.Timeline) != cfg.TransitionsShown {
		t.Fatalf("%d rows, want %d", len(p.Timeline), cfg.TransitionsShown)
	}
	if p.Timeline[0].At != t0.UTC().Format("15:04:05") || p.Timeline[0].Took != "1.00 s" {
		t.Errorf("first row %+v, want the newest (1 s)", p.Timeline[0])
	}
	last := p.Timeline[len(p.Timeline)-1]
	if last.BarW != "100" {
		t.Errorf("the longest shown has a bar of %s, want 100", last.BarW)
	}
	if empty := modelsVM(cfg, &snapshot{}); empty.Shown {
		t.Error("the panel shows with no models served on demand")
	}
}
