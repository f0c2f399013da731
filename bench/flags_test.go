package bench

import (
	"testing"

	"github.com/hearth-llm/hearth/kvbm"
)

// TestFlagsDefaultsAreHearthUps: without flags, hearth bench agentic
// simulates what hearth up serves on its first start: the layout for
// coding agents, host RAM and the node store below the GPU (one default,
// kvbm.DefaultTiers), the simulated engines' host RAM, inferred hints, and
// engines that start empty (a later start is --warm-start on).
func TestFlagsDefaultsAreHearthUps(t *testing.T) {
	r, err := prepareSwapFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Comparison
	if c.Tiers != kvbm.DefaultTiers {
		t.Errorf("tiers %q, want hearth up's %q", c.Tiers, kvbm.DefaultTiers)
	}
	if c.KVOffloadingGiB != kvbm.DefaultSimRAMGiB {
		t.Errorf("host RAM %v GiB, want hearth up --sim's %v", c.KVOffloadingGiB, kvbm.DefaultSimRAMGiB)
	}
	if !c.InferHints || c.WarmStart || !r.DefaultLayout || r.SimSpec != "2x4090" {
		t.Errorf("infer hints %v, warm start %v, default layout %v, sim %q; want on, off (a first start), the agent layout, 2x4090",
			c.InferHints, c.WarmStart, r.DefaultLayout, r.SimSpec)
	}
	// The store is the simulation's to open: a ram+ssd run gets one, a run
	// told --kvbm ram does not.
	if r, err = prepareSwapFlags(t, "--kvbm", kvbm.TiersRAM); err != nil || r.Comparison.Tiers != kvbm.TiersRAM {
		t.Errorf("--kvbm ram: %q, %v", r.Comparison.Tiers, err)
	}
}
