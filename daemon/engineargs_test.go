package daemon

import (
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
)

// TestPlanEnginesPassesProfileToSimulatedProcesses: with --pprof, a
// simulated engine run as a process serves its own profiles; in-process
// engines share the daemon's, and --engine-arg's list is not changed.
func TestPlanEnginesPassesProfileToSimulatedProcesses(t *testing.T) {
	gpus := []nodes.GPU{{Index: 0, Kind: "rtx4090", Node: "n"}, {Index: 1, Kind: "rtx4090", Node: "n"}}
	for _, tc := range []struct {
		runtime string
		profile bool
		want    []string
	}{
		{RuntimeProcess, true, []string{"--x", "--pprof"}},
		{RuntimeProcess, false, []string{"--x"}},
		{RuntimeSim, true, []string{"--x"}},
	} {
		args := make([]string, 1, 4)
		args[0] = "--x"
		cfg := Config{Models: []string{"qwen3-14b-fp8"}, EngineRuntime: tc.runtime, Profile: tc.profile, EngineArgs: args}
		specs, _, err := planEngines(cfg, gpus)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if !slices.Equal(s.ExtraArgs, tc.want) {
				t.Errorf("%s, profile %v: %s has %q, want %q", tc.runtime, tc.profile, s.Name, s.ExtraArgs, tc.want)
			}
		}
		if !slices.Equal(args[:cap(args)][:1], []string{"--x"}) || slices.Contains(args[:cap(args)], "--pprof") {
			t.Errorf("the configured engine args changed: %q", args[:cap(args)])
		}
	}
}
