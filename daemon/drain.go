package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// A node is drained when its owner wants its GPU back: by hand (hearth
// node drain), or by itself when another program, a game, takes memory
// of a GPU its engines run on. A drained node takes no new requests while
// another worker of the model can (router.SetDrained): its own router and
// every peer's route its sessions' next turns elsewhere, and what runs on
// it finishes. It keeps its engines, so that it serves again, with its
// cache, the moment the drain ends.

// Drain reasons as the heartbeat carries them (cluster.Heartbeat.Drained),
// joined by "+" when both hold.
const (
	DrainManual   = "manual"
	DrainGPUTaken = "gpu_taken"
)

// DrainText says a drain reason in words: "drained (manual)", "drained
// (GPU taken by another program)", both; "" when reason is "".
func DrainText(reason string) string {
	if reason == "" {
		return ""
	}
	var words []string
	for _, r := range strings.Split(reason, "+") {
		switch r {
		case DrainManual:
			words = append(words, "manual")
		case DrainGPUTaken:
			words = append(words, "GPU taken by another program")
		default:
			words = append(words, r) // a newer peer's reason, as it said it
		}
	}
	return "drained (" + strings.Join(words, "; ") + ")"
}

// GPUTakenPolicy says when another program has taken a GPU: its memory
// beyond what other programs held when the engines were planned (or less,
// the least seen since) reaches TakenBytes; and when it is free again:
// that memory stays at or below FreeBytes for Hold. The gap between the
// two and the hold keep a game that loads in waves, or a quick restart of
// it, from sending the node in and out of routing.
type GPUTakenPolicy struct {
	TakenBytes uint64
	FreeBytes  uint64
	Hold       time.Duration
}

// DefaultGPUTakenPolicy: a game takes several GiB; a browser or the
// desktop a few hundred MiB, which do not drain the node.
var DefaultGPUTakenPolicy = GPUTakenPolicy{TakenBytes: 1 << 30, FreeBytes: 512 << 20, Hold: 30 * time.Second}

// drainWorkers is the local router's side of a drain: the fleet drains
// the workers of this node's engines, those put into service later too.
type drainWorkers interface{ setDrained(bool) }

// drainPeers is the cluster's side: the peers hear the reason ("" when
// the node serves) and drain its engines in their routers.
type drainPeers interface{ SetDrained(reason string) }

// drainer holds the node's drain and applies it.
type drainer struct {
	workers drainWorkers
	peers   drainPeers // nil: no cluster
	policy  GPUTakenPolicy
	clk     clock.Clock
	log     *slog.Logger

	// specs and identities tell the engines' GPUs and processes from
	// other programs'.
	specs      []hruntime.Spec
	identities func() []hruntime.Identity
	procRoot   string

	mu        sync.Mutex
	manual    bool
	takenBy   string            // what took a GPU; "" when none has
	freeSince time.Time         // since when the taken GPUs read free
	baseline  map[gpuRef]uint64 // other programs' memory allowed, by GPU
	applied   string            // the reason last applied
}

type gpuRef struct {
	node  string
	index int
}

// newDrainer starts with the memory other programs held on gpus when the
// engines were planned as what they may keep.
func newDrainer(workers drainWorkers, peers drainPeers, specs []hruntime.Spec, gpus []nodes.GPU, identities func() []hruntime.Identity,
	policy GPUTakenPolicy, clk clock.Clock, log *slog.Logger) *drainer {
	d := &drainer{workers: workers, peers: peers, policy: policy, clk: clock.Or(clk), log: log, specs: specs, identities: identities,
		procRoot: "/proc", baseline: map[gpuRef]uint64{}}
	ids := identities() // none yet, unless the runtime adopted running engines
	for _, g := range gpus {
		if other, ok := d.otherMemory(g, ids, true); ok {
			d.baseline[gpuRef{g.Node, g.Index}] = other
		}
	}
	return d
}

// SetManual drains the node by hand or ends that drain.
func (d *drainer) SetManual(drained bool) adminapi.NodeDrain {
	d.mu.Lock()
	d.manual = drained
	d.mu.Unlock()
	d.apply()
	return d.Drain()
}

// Drain is the node's drain as the admin API shows it.
func (d *drainer) Drain() adminapi.NodeDrain {
	d.mu.Lock()
	defer d.mu.Unlock()
	reason := d.reasonLocked()
	out := adminapi.NodeDrain{Drained: reason != "", Manual: d.manual, GPUTaken: d.takenBy != "", TakenBy: d.takenBy, Text: DrainText(reason)}
	if reason == "" {
		out.Text = "serving"
	}
	return out
}

// Reason is the node's drain reason; "" while it serves.
func (d *drainer) Reason() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reasonLocked()
}

func (d *drainer) reasonLocked() string {
	var rs []string
	if d.manual {
		rs = append(rs, DrainManual)
	}
	if d.takenBy != "" {
		rs = append(rs, DrainGPUTaken)
	}
	return strings.Join(rs, "+")
}

// observe takes a reading of the GPUs (the sampler's, every interval):
// a GPU of the engines with more memory taken by other programs than
// policy.TakenBytes drains the node at once; the drain ends once every
// such GPU has read at or below policy.FreeBytes for policy.Hold.
func (d *drainer) observe(inv nodes.Inventory) {
	ids := d.identities()
	now := d.clk.Now()
	var taken []string
	free := true
	d.mu.Lock()
	for _, g := range inv.GPUs {
		if !d.servesOn(g) {
			continue
		}
		other, ok := d.otherMemory(g, ids, false)
		if !ok {
			continue
		}
		ref := gpuRef{g.Node, g.Index}
		base, seen := d.baseline[ref]
		if !seen || other < base && g.ProcessesKnown {
			// Less than before is what other programs hold now: a game
			// closed; the next one is measured from here. Memory read as
			// used beyond the reservations is not lowered so: it reads
			// low while an engine loads.
			base = other
			d.baseline[ref] = base
		}
		var extra uint64
		if other > base {
			extra = other - base
		}
		if extra >= d.policy.TakenBytes {
			taken = append(taken, fmt.Sprintf("%s holds %.1f GiB of GPU %d", d.whoTook(g, ids), float64(extra)/(1<<30), g.Index))
		}
		if extra > d.policy.FreeBytes {
			free = false
		}
	}
	switch {
	case len(taken) > 0:
		if d.takenBy == "" {
			d.log.Warn("another program took GPU memory: the node is drained", "taken", strings.Join(taken, "; "))
		}
		d.takenBy, d.freeSince = strings.Join(taken, "; "), time.Time{}
	case d.takenBy != "" && !free:
		d.freeSince = time.Time{}
	case d.takenBy != "" && d.freeSince.IsZero():
		d.freeSince = now
		fallthrough
	case d.takenBy != "":
		if now.Sub(d.freeSince) >= d.policy.Hold {
			d.log.Info("GPU memory freed: the node serves again", "was", d.takenBy)
			d.takenBy, d.freeSince = "", time.Time{}
		}
	}
	d.mu.Unlock()
	d.apply()
}

// apply makes the router and the peers follow the reason when it changed.
func (d *drainer) apply() {
	d.mu.Lock()
	reason, was := d.reasonLocked(), d.applied
	d.applied = reason
	d.mu.Unlock()
	if reason == was {
		return
	}
	if reason != "" {
		d.log.Info("node drained: new requests go to other nodes", "reason", DrainText(reason))
	} else {
		d.log.Info("node back in routing")
	}
	if (reason != "") != (was != "") {
		d.workers.setDrained(reason != "")
	}
	if d.peers != nil {
		d.peers.SetDrained(reason)
	}
}

// servesOn reports whether an engine of the node runs on g.
func (d *drainer) servesOn(g nodes.GPU) bool {
	for _, s := range d.specs {
		for _, sg := range s.GPUs() {
			if sameGPU(sg, g) {
				return true
			}
		}
	}
	return false
}

// otherMemory is what programs other than the engines (their processes'
// ids) hold of g: the processes the driver lists, when it lists them;
// else what it says is used beyond the engines' reservations (WSL2's
// driver names no processes), or, before the engines start, all it says
// is used. ok is false when the driver says neither.
func (d *drainer) otherMemory(g nodes.GPU, ids []hruntime.Identity, beforeEngines bool) (uint64, bool) {
	switch {
	case g.ProcessesKnown:
		var other uint64
		for _, p := range g.Processes {
			if !d.ownedByEngine(p.PID, ids) {
				other += p.UsedBytes
			}
		}
		return other, true
	case g.MemoryUsageKnown:
		if beforeEngines {
			return g.MemoryUsed, true
		}
		var reserved uint64
		for _, s := range d.specs {
			for _, sg := range s.GPUs() {
				if sameGPU(sg, g) {
					reserved += uint64(s.GPUMemoryUtilization * float64(g.MemoryTotal))
				}
			}
		}
		if g.MemoryUsed <= reserved {
			return 0, true
		}
		return g.MemoryUsed - reserved, true
	}
	return 0, false
}

func (d *drainer) ownedByEngine(pid int, ids []hruntime.Identity) bool {
	for _, id := range ids {
		if ownedBy(pid, id, d.procRoot) {
			return true
		}
	}
	return false
}

// whoTook names the largest other program on g, when the driver lists
// programs: "game.exe (PID 4242)"; else "another program".
func (d *drainer) whoTook(g nodes.GPU, ids []hruntime.Identity) string {
	var top nodes.Process
	for _, p := range g.Processes {
		if !d.ownedByEngine(p.PID, ids) && p.UsedBytes >= top.UsedBytes {
			top = p
		}
	}
	switch {
	case top.PID == 0:
		return "another program"
	case top.Name == "":
		return fmt.Sprintf("PID %d", top.PID)
	}
	return fmt.Sprintf("%s (PID %d)", top.Name, top.PID)
}
