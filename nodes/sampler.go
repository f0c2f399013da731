package nodes

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	Source   Discoverer
	Interval time.Duration // default 2s
	Clock    clock.Clock   // nil: real time
	Logger   *slog.Logger  // nil: slog.Default()

	// OnLost is called, from the sampling goroutine, when a GPU that read
	// fine becomes lost: the driver says so, it drops out of the list, or
	// the driver cannot be read at all any more. OnFound is called when a
	// GPU that was lost reads fine again. Either may be nil.
	OnLost  func(GPU)
	OnFound func(GPU)
	// OnReading, when set, is given every reading, from the goroutine
	// that sampled it, after the lost and found events: the drain
	// watches the memory other programs take by it.
	OnReading func(Inventory)
}

// Sampler reads a Discoverer every interval and keeps the latest inventory
// for the console, the planner and the Prometheus gauges, so that none of
// them calls into the driver on its own. It also turns the readings into
// lost and found events.
//
// A GPU the sampler has seen is never silently dropped: when it vanishes
// from a reading, or the whole reading fails, it stays in Latest marked lost
// with the reason, until it reads fine again.
type Sampler struct {
	cfg SamplerConfig
	clk clock.Clock
	log *slog.Logger

	mu      sync.Mutex
	latest  Inventory
	updated time.Time
	lastErr error
	lost    map[string]bool // by GPU key; false: seen and healthy
}

// NewSampler returns a sampler over cfg.Source. Call Sample once to have a
// first reading before Run starts.
func NewSampler(cfg SamplerConfig) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sampler{cfg: cfg, clk: clock.Or(cfg.Clock), log: log, lost: map[string]bool{}}
}

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	tick, stop := s.clk.NewTicker(s.cfg.Interval)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if _, err := s.Sample(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("gpu sampling failed", "err", err)
			}
		}
	}
}

// Sample reads the GPUs once, records the reading, fires lost and found
// events, and returns the reading. On error the returned inventory holds
// the GPUs seen before, marked lost.
func (s *Sampler) Sample(ctx context.Context) (Inventory, error) {
	inv, err := s.cfg.Source.Discover(ctx)
	if ctx.Err() != nil {
		return Inventory{}, ctx.Err()
	}
	s.mu.Lock()
	if err != nil {
		inv = Inventory{Host: s.latest.Host}
	}
	s.fillIdentity(inv.GPUs)
	inv.GPUs = s.keepVanished(inv.GPUs, err)
	lost, found := s.transitions(inv.GPUs)
	s.latest, s.updated, s.lastErr = inv.Copy(), s.clk.Now(), err
	s.mu.Unlock()

	for _, g := range lost {
		s.log.Warn("gpu lost", "node", g.Node, "gpu", g.Index, "uuid", g.UUID, "err", g.Err)
		if s.cfg.OnLost != nil {
			s.cfg.OnLost(g)
		}
	}
	for _, g := range found {
		s.log.Info("gpu back", "node", g.Node, "gpu", g.Index, "uuid", g.UUID)
		if s.cfg.OnFound != nil {
			s.cfg.OnFound(g)
		}
	}
	if s.cfg.OnReading != nil {
		s.cfg.OnReading(inv.Copy())
	}
	return inv, err
}

// fillIdentity gives a GPU read without its UUID (a lost GPU answers
// nothing, its UUID included) the identity the GPU at the same node and
// index had before, so that it stays the same GPU. s.mu is held.
func (s *Sampler) fillIdentity(gpus []GPU) {
	for i, g := range gpus {
		if g.UUID != "" {
			continue
		}
		for _, old := range s.latest.GPUs {
			if old.UUID != "" && old.Node == g.Node && old.Index == g.Index {
				gpus[i].UUID = old.UUID
				if g.Name == "" {
					gpus[i].Name, gpus[i].Kind = old.Name, old.Kind
				}
				if g.MemoryTotal == 0 {
					gpus[i].MemoryTotal = old.MemoryTotal
				}
				break
			}
		}
	}
}

// keepVanished adds, marked lost, the GPUs of the previous reading that
// the new one lacks. readErr is why the whole reading failed, if it did.
// s.mu is held.
func (s *Sampler) keepVanished(gpus []GPU, readErr error) []GPU {
	present := make(map[string]bool, len(gpus))
	for _, g := range gpus {
		present[gpuKey(g)] = true
	}
	for _, old := range s.latest.GPUs {
		if present[gpuKey(old)] {
			continue
		}
		g := NewGPU(old.Node, old.Index)
		g.UUID, g.Name, g.Kind, g.MemoryTotal, g.Simulated = old.UUID, old.Name, old.Kind, old.MemoryTotal, old.Simulated
		g.Lost = true
		switch {
		case readErr != nil:
			g.Err = readErr.Error()
		case old.Lost:
			g.Err = old.Err
		default:
			g.Err = "the driver no longer lists this GPU"
		}
		gpus = append(gpus, g)
	}
	return gpus
}

// transitions compares a reading with the GPUs' last known state. s.mu is
// held.
func (s *Sampler) transitions(gpus []GPU) (lost, found []GPU) {
	for _, g := range gpus {
		key := gpuKey(g)
		wasLost, seen := s.lost[key]
		switch {
		case g.Lost && seen && !wasLost:
			lost = append(lost, g.Copy())
		case !g.Lost && seen && wasLost:
			found = append(found, g.Copy())
		}
		if g.Lost && !seen {
			// Lost at first sight: nothing runs on it yet, but callers
			// planning engines need to hear of it.
			lost = append(lost, g.Copy())
		}
		s.lost[key] = g.Lost
	}
	return lost, found
}

// gpuKey identifies a GPU across readings: its UUID, which survives a
// reordering of indices, or its index when the driver gave no UUID.
func gpuKey(g GPU) string {
	if g.UUID != "" {
		return g.UUID
	}
	return g.Node + "/" + strconv.Itoa(g.Index)
}

// Latest returns the last reading (a copy), when it was taken, and the
// error of that reading (nil when it read fine). Before the first reading
// the inventory is empty and the time zero.
func (s *Sampler) Latest() (Inventory, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest.Copy(), s.updated, s.lastErr
}

// GPU returns the latest reading of the GPU with uuid, or false.
func (s *Sampler) GPU(uuid string) (GPU, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.latest.GPUs {
		if g.UUID == uuid {
			return g.Copy(), true
		}
	}
	return GPU{}, false
}
