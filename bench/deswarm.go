package bench

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/hearth-llm/hearth/router/warm"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// Warm start (SimConfig.WarmStart): a daemon that has served a client
// before remembers the prefixes its sessions share (router/warm) and
// prefills them on an engine that has just started, before the first
// session after the start needs them. The simulation learns them the
// daemon's way, with a warm.Learner told the first prompts of sessions,
// here two sessions of an earlier run of the same workload, and prefills
// them during the engines' start-up.

// earlierSession numbers the sessions an earlier run is taken to have
// served: far beyond any run's own, so their tasks are not the run's.
const earlierSession = 1 << 30

// warmLead is how long before time zero the start-up's prefill begins; a
// prefill that would not end by time zero is an error, not a head start
// that the run's figures hide.
const warmLead = 10 * time.Minute

// learnEarlierPrefixes returns a Learner told the first prompts of two
// earlier sessions of a.
func learnEarlierPrefixes(a *Agentic, model string) *warm.Learner {
	l := warm.New(warm.Config{})
	for i := range 2 {
		s := a.Session(earlierSession + i)
		l.Observe(model, s.Turns[0].Prompt)
	}
	return l
}

// observeFirstPrompt tells the learner of a session's first prompt, by
// the gateway's rule: a turn with no answer of the model in it yet (a
// subagent's first prompt holds its parent's answers).
func (d *des) observeFirstPrompt(req *Request) {
	if d.learner == nil || req.Side {
		return
	}
	for _, sg := range req.Segments {
		if sg.Role == RoleAssistant {
			return
		}
	}
	d.learner.Observe(d.cfg.Model, req.Prompt)
}

// warmAfterRestart sends the hot prefixes to every restarted engine before
// the requests held for the restart, as the daemon warms an engine it puts
// back into service; the turns that follow share the prefill's computation
// in the engine's prefix cache. The prefills are nobody's requests: their
// outputs are dropped.
func (d *des) warmAfterRestart() {
	if d.learner == nil {
		return
	}
	hot := d.learner.Hot(d.cfg.Model)
	for _, e := range d.engines {
		for i, p := range hot {
			id := fmt.Sprintf("warm-restart-%d", i)
			if err := e.core.Add(d.now, &sim.Request{ID: id, Prompt: p, Output: d.fill(1)}); err == nil {
				d.warmed++
			}
		}
	}
}

// warmBeforeStart prefills prefixes on every engine before time zero, as
// the daemon's start-up does, and hands the engines' KV events to the
// router, so that both start where a warmed engine starts.
func (d *des) warmBeforeStart(prefixes [][]uint32) error {
	if len(prefixes) == 0 {
		return nil
	}
	for _, e := range d.engines {
		now := -warmLead
		for i, p := range prefixes {
			if err := e.core.Add(now, &sim.Request{ID: fmt.Sprintf("warm-%d", i), Prompt: p, Output: d.fill(1)}); err != nil {
				return fmt.Errorf("bench: sim: warm start: %w", err)
			}
		}
		for e.core.HasWork() {
			now += e.core.Step(now).Duration
		}
		if now > 0 {
			return fmt.Errorf("bench: sim: warm start: the prefill would end %v after time zero", now)
		}
		d.warmed += len(prefixes)
	}
	for len(d.events.items) > 0 && d.events.items[0].at <= 0 {
		ev := heap.Pop(&d.events).(desEvent)
		if ev.kind == evDeliver {
			d.deliver(ev)
		}
	}
	return nil
}
