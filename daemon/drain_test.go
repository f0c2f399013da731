package daemon

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// drainRecord records what a drain applied: the local workers' drain and
// the reason the peers were told, each change once.
type drainRecord struct {
	workers []bool
	peers   []string
}

func (r *drainRecord) setDrained(d bool)        { r.workers = append(r.workers, d) }
func (r *drainRecord) SetDrained(reason string) { r.peers = append(r.peers, reason) }

// rigGPU is GPU 0 of node rig as a driver that lists processes reads
// it: Hearth's engine (PID 100) and, with other > 0, a game.
func rigGPU(other uint64) nodes.Inventory {
	g := nodes.NewGPU("rig", 0)
	g.UUID, g.MemoryTotal, g.ProcessesKnown = "GPU-rig-0", 24<<30, true
	g.Processes = []nodes.Process{{PID: 100, UsedBytes: 20 << 30, Name: "vllm"}}
	if other > 0 {
		g.Processes = append(g.Processes, nodes.Process{PID: 4242, UsedBytes: other, Name: "game.exe"})
	}
	return nodes.Inventory{GPUs: []nodes.GPU{g}}
}

func testDrainer(t *testing.T, planned nodes.Inventory) (*drainer, *drainRecord, *clock.Fake) {
	t.Helper()
	rec := &drainRecord{}
	clk := clock.NewFake(time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC))
	specs := []hruntime.Spec{{Name: "rig/gpu0", GPU: hruntime.GPU{Node: "rig", Index: 0, UUID: "GPU-rig-0"}, GPUMemoryUtilization: 0.8}}
	ids := func() []hruntime.Identity { return []hruntime.Identity{{PID: 100}} }
	d := newDrainer(rec, rec, specs, planned.GPUs, ids, GPUTakenPolicy{TakenBytes: 1 << 30, FreeBytes: 512 << 20, Hold: 30 * time.Second},
		clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return d, rec, clk
}

// TestGameOnTheGPUDrainsTheNode: memory a game takes beyond what other
// programs held at planning drains the node at the first reading; it
// stays drained while the memory is above the free mark, and while it is
// below it for less than the hold; it returns after the hold. A desktop
// holding 300 MiB at planning is allowed for; a browser's 400 MiB more is
// not a game.
func TestGameOnTheGPUDrainsTheNode(t *testing.T) {
	d, rec, clk := testDrainer(t, rigGPU(300<<20))
	d.observe(rigGPU(700 << 20))
	if d.Reason() != "" {
		t.Fatalf("400 MiB over the desktop drained the node: %q", d.Reason())
	}
	d.observe(rigGPU(8 << 30))
	if d.Reason() != DrainGPUTaken || !strings.Contains(d.Drain().TakenBy, "game.exe (PID 4242) holds 7.7 GiB of GPU 0") {
		t.Fatalf("after a game took 8 GiB: reason %q, %+v", d.Reason(), d.Drain())
	}
	steps := []struct {
		after time.Duration
		other uint64
		want  string
	}{
		{time.Second, 1 << 30, DrainGPUTaken},        // between the marks: no release
		{20 * time.Second, 400 << 20, DrainGPUTaken}, // free from here
		{29 * time.Second, 400 << 20, DrainGPUTaken}, // 29 s of the hold
		{1 * time.Second, 900 << 20, DrainGPUTaken},  // above the free mark again: the hold starts over
		{1 * time.Second, 300 << 20, DrainGPUTaken},  // free from here
		{29*time.Second + 999*time.Millisecond, 300 << 20, DrainGPUTaken},
		{time.Millisecond, 300 << 20, ""}, // 30 s free
	}
	for i, s := range steps {
		clk.Advance(s.after)
		d.observe(rigGPU(s.other))
		if got := d.Reason(); got != s.want {
			t.Fatalf("step %d (%v later, others %d MiB): reason %q, want %q", i, s.after, s.other>>20, got, s.want)
		}
	}
	if want := []bool{true, false}; len(rec.workers) != 2 || rec.workers[0] != want[0] || rec.workers[1] != want[1] {
		t.Errorf("the local workers were set %v, want %v once each", rec.workers, want)
	}
	if len(rec.peers) != 2 || rec.peers[0] != DrainGPUTaken || rec.peers[1] != "" {
		t.Errorf("the peers were told %q, want gpu_taken then \"\"", rec.peers)
	}
}

// TestManualDrainOutlastsTheGame: a drain by hand holds while a game
// comes and goes, and a game's drain outlasts --undo; the reasons add
// up in what peers and the command line see.
func TestManualDrainOutlastsTheGame(t *testing.T) {
	d, rec, clk := testDrainer(t, rigGPU(0))
	if got := d.SetManual(true); !got.Drained || got.Text != "drained (manual)" {
		t.Fatalf("drain by hand: %+v", got)
	}
	d.observe(rigGPU(6 << 30))
	if got := d.Drain(); got.Text != "drained (manual; GPU taken by another program)" {
		t.Errorf("both: %q", got.Text)
	}
	clk.Advance(time.Second)
	d.observe(rigGPU(0))
	clk.Advance(time.Minute)
	d.observe(rigGPU(0))
	if got := d.Reason(); got != DrainManual {
		t.Errorf("after the game quit, reason %q, want manual", got)
	}
	d.observe(rigGPU(6 << 30))
	if got := d.SetManual(false); !got.Drained || got.Manual || !got.GPUTaken {
		t.Errorf("--undo while the game plays: %+v, want drained for the GPU", got)
	}
	if want := []string{DrainManual, DrainManual + "+" + DrainGPUTaken, DrainManual, DrainManual + "+" + DrainGPUTaken, DrainGPUTaken}; strings.Join(rec.peers, ",") != strings.Join(want, ",") {
		t.Errorf("the peers were told %q, want %q", rec.peers, want)
	}
	if len(rec.workers) != 1 || !rec.workers[0] {
		t.Errorf("the local workers were set %v, want drained once", rec.workers)
	}
}

// TestDrainWithoutProcessList: a driver that lists no processes (WSL2)
// says only what is used; beyond the engines' reservations and what was
// used at planning, it is another program's.
func TestDrainWithoutProcessList(t *testing.T) {
	gpu := func(used uint64) nodes.Inventory {
		g := nodes.NewGPU("rig", 0)
		g.UUID, g.MemoryTotal, g.MemoryUsed, g.MemoryUsageKnown = "GPU-rig-0", 24<<30, used, true
		return nodes.Inventory{GPUs: []nodes.GPU{g}}
	}
	d, _, _ := testDrainer(t, gpu(1<<30)) // the desktop held 1 GiB at planning
	reserved := uint64(24<<30) / 5 * 4
	d.observe(gpu(2 << 30)) // the engine loading: less than its reservation
	d.observe(gpu(reserved + 1<<30))
	if got := d.Reason(); got != "" {
		t.Fatalf("the engine loaded beside the desktop drained the node: %q", got)
	}
	d.observe(gpu(reserved + 4<<30))
	if got := d.Drain(); d.Reason() != DrainGPUTaken || !strings.Contains(got.TakenBy, "another program holds 3.0 GiB of GPU 0") {
		t.Errorf("3 GiB more used: %+v", got)
	}
}

// TestDrainText: the reasons in the words the console and the command
// line show.
func TestDrainText(t *testing.T) {
	for reason, want := range map[string]string{
		"":                 "",
		"manual":           "drained (manual)",
		"gpu_taken":        "drained (GPU taken by another program)",
		"manual+gpu_taken": "drained (manual; GPU taken by another program)",
		"maintenance":      "drained (maintenance)",
	} {
		if got := DrainText(reason); got != want {
			t.Errorf("DrainText(%q) = %q, want %q", reason, got, want)
		}
	}
}
