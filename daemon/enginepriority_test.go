package daemon

import (
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The gateway is told the engines' priority convention when they all share
// one, and to send none otherwise.
func TestEnginePriority(t *testing.T) {
	spec := func(k hruntime.Kind) hruntime.Spec { return hruntime.Spec{Engine: k} }
	for _, tc := range []struct {
		name  string
		specs []hruntime.Spec
		want  int
	}{
		{"vllm, lower first", []hruntime.Spec{spec(hruntime.KindVLLM), spec(hruntime.KindVLLM)}, -1},
		{"sglang, higher first", []hruntime.Spec{spec(hruntime.KindSGLang)}, 1},
		{"mixed", []hruntime.Spec{spec(hruntime.KindVLLM), spec(hruntime.KindSGLang)}, 0},
		{"unknown kind", []hruntime.Spec{spec("tgi")}, 0},
	} {
		if got := enginePriority(tc.specs); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
