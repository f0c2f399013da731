package router

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
)

// registerTestPolicy registers p for the test and forgets it after.
func registerTestPolicy(t *testing.T, p PolicyInfo) {
	t.Helper()
	RegisterPolicy(p)
	t.Cleanup(func() {
		policies.mu.Lock()
		defer policies.mu.Unlock()
		delete(policies.byName, p.Name)
	})
}

// tierProbe is a policy that exists only in this test, written as a new
// policy would be: it asks for the lower tiers, sends a request where
// most of its prompt is cached in any tier, and lets a waiting request
// whose prompt some worker's host RAM holds go before one that must be
// computed.
type tierProbe struct{}

func (tierProbe) Needs() PolicyNeeds {
	return PolicyNeeds{LowerTiers: true, QueueDelay: func(_ *RouteInput, cands []Candidate) float64 {
		most := 0
		for _, c := range cands {
			most = max(most, c.RAMBlocks)
		}
		return 10 / float64(1+most)
	}}
}

func (tierProbe) Score(_ *RouteInput, cands []Candidate) {
	for i := range cands {
		c := &cands[i]
		c.Cost = -float64(c.CachedBlocks + c.RAMBlocks + c.DiskBlocks)
	}
}

func (tierProbe) Choose(in *RouteInput, cands []Candidate) (int, string) {
	return in.PickLowest(cands)
}

// TestRegisteredPolicy: a policy registered by name is listed, accepted by
// Config.Validate, routes the requests that name it, sees the lower tiers
// it asks for (and a policy that does not ask sees none), and orders the
// queue by its own delay.
func TestRegisteredPolicy(t *testing.T) {
	const name = "test_tiers"
	registerTestPolicy(t, PolicyInfo{Name: name, Rank: 100, New: func(Config) Policy { return tierProbe{} }})

	want := []string{PolicyRoundRobin, PolicyRandom, PolicyLeastLoaded, PolicyKV, PolicyHearth, name}
	if got := PolicyNames(); !slices.Equal(got, want) {
		t.Errorf("PolicyNames() = %v, want %v", got, want)
	}
	if err := (Config{Policy: name}).Validate(); err != nil {
		t.Errorf("Validate with the registered policy: %v", err)
	}
	if err := (Config{Policy: "no_such"}).Validate(); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("Validate with an unknown policy: %v, want ErrUnknownPolicy", err)
	}

	t.Run("lower tiers", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyRoundRobin},
			WorkerInfo{Name: "a"}, WorkerInfo{Name: "b", Node: "n1"})
		h := chain("tiers", 12)
		r.Index().Store(0, kvtier.GPU, h[:2])
		r.Index().Store(1, kvtier.RAM, h[:8])
		r.Index().Store(1, kvtier.Disk, h[8:])

		d := route(t, r, &Request{ID: "probe", Hashes: h, Policy: name})
		if d.Policy != name || d.WorkerID != 1 || d.Reason != ReasonLowestCost {
			t.Fatalf("routed by %q to worker %d (%s), want %s to 1 by lowest cost", d.Policy, d.WorkerID, d.Reason, name)
		}
		if a, b := d.Candidates[0], d.Candidates[1]; a.CachedBlocks != 2 || a.RAMBlocks != 0 || b.RAMBlocks != 8 || b.DiskBlocks != 4 {
			t.Errorf("candidates %+v, want a with 2 GPU blocks, b with 8 in RAM and 4 on disk", d.Candidates)
		}
		if d.LowerTierBlocks != 12 || d.PredictedHitRate != 1 {
			t.Errorf("lower-tier blocks %d, predicted hit rate %v; want 12 and 1", d.LowerTierBlocks, d.PredictedHitRate)
		}

		// The daemon's round robin does not ask for lower tiers.
		d = route(t, r, &Request{ID: "rr", Hashes: h})
		for _, c := range d.Candidates {
			if c.RAMBlocks != 0 || c.DiskBlocks != 0 {
				t.Errorf("round robin saw lower tiers: %+v", d.Candidates)
			}
		}
	})

	t.Run("queue order", func(t *testing.T) {
		r, clk := newTestRouter(t, Config{Policy: name, SaturationFraction: 0.5, QueueSize: 8},
			WorkerInfo{Name: "a", CapacityBlocks: 100})
		r.Index().Store(0, kvtier.RAM, chain("warm", 64))
		route(t, r, &Request{ID: "first", Hashes: chain("first", 60)})
		// In arrival order cold would go first.
		tickets := map[string]*Ticket{}
		for _, id := range []string{"cold", "warm"} {
			_, tk, err := r.Enqueue(&Request{ID: id, Hashes: chain(id, 64)})
			if err != nil || tk == nil {
				t.Fatalf("Enqueue(%s): ticket %v, err %v", id, tk, err)
			}
			tickets[id] = tk
		}
		clk.Advance(time.Second)
		r.Free("first")
		if !tickets["warm"].Ready() || tickets["cold"].Ready() {
			t.Errorf("after the first request ended: warm dispatched %v, cold %v; want only warm", tickets["warm"].Ready(), tickets["cold"].Ready())
		}
	})
}

func TestRegisterPolicyRefusesATakenName(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering kv a second time did not panic")
		}
	}()
	RegisterPolicy(PolicyInfo{Name: PolicyKV, New: func(Config) Policy { return tierProbe{} }})
}
