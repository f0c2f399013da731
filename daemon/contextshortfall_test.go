package daemon

import (
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestContextShortfall: hearth up says when the shortest planned context
// leaves the agent clients' first prompts too little room, and says
// nothing when it does not or no context is known.
func TestContextShortfall(t *testing.T) {
	spec := func(ctx int) hruntime.Spec { return hruntime.Spec{Estimate: catalog.Profile{MaxModelLen: ctx}} }
	if got := contextShortfall([]hruntime.Spec{spec(40960), spec(16384)}); !strings.Contains(got, "16,384 tokens is shorter than the first prompt of Claude Code") {
		t.Errorf("16k: %q", got)
	}
	if got := contextShortfall([]hruntime.Spec{spec(29856), spec(29856)}); !strings.Contains(got, "leaves Claude Code under 12,288 tokens") {
		t.Errorf("one 4090 each: %q", got)
	}
	for _, specs := range [][]hruntime.Spec{{spec(131072)}, {spec(0)}, nil} {
		if got := contextShortfall(specs); got != "" {
			t.Errorf("%+v: %q", specs, got)
		}
	}
}
