package bench

import (
	"time"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// Prefill in the tool pause, as the gateway does it with inferred hints on
// (api/speculate.go, prefillToolPause): when a session's turn ends in tool
// calls, the gateway sends the next turn's prompt up to where the tool
// result goes, less its last token, to the worker that wrote the answer,
// as a completion of one token at router.PriorityBackground in the
// engine's convention. It goes straight to the engine, not through the
// router, so the router only learns of it from the engine's KV events. The
// session's next turn cancels it if it is still there, before the turn is
// routed; the gateway's SpeculativeTimeout bounds it otherwise.
//
// In the workload a turn's prompt is the previous prompt, its answer and
// the tool result (Agentic.build), and the answer comes back exactly as
// the engine generated it, so the prompt up to the result is the previous
// prompt and answer: the simulated gateway renders what the real one does
// for a client whose echo matches the template. What the prefill can win
// here is what was evicted from the worker during the pause.

// toolPausePrefillTimeout is the gateway's default SpeculativeTimeout
// (api/config.go, defaultSpecTimeout), which cancels a prefill still
// running.
const toolPausePrefillTimeout = 30 * time.Second

// endsInToolCall reports whether req's answer is a tool call: a turn of a
// session (or subagent) that is neither its last, a summarisation nor a
// side request. The turn that spawns subagents calls the subagent tool.
func endsInToolCall(req *Request) bool {
	return !req.Side && !req.Last && !req.Compaction && len(req.Answer) > 0
}

// prefillToolPause starts the prefill of the turn after f's request on the
// engine that served it.
func (d *des) prefillToolPause(f *flight) {
	req, e := f.req, f.engine
	if e == nil {
		return
	}
	if old := d.pauses[req.Session]; old != nil {
		d.cancelPrefill(old) // a pause no turn followed
	}
	n := len(req.Prompt) + len(req.Answer) - 1 // the last token may join the result's
	if n <= 0 {
		return
	}
	prompt := make([]uint32, 0, n)
	prompt = append(append(prompt, req.Prompt...), req.Answer...)[:n]
	priority := router.PriorityBackground // Hearth's: higher first
	if !e.core.Config().PriorityHigherFirst {
		priority = -priority // vLLM's: lower first
	}
	p := &prefill{id: req.ID() + "/prefill", session: req.Session, engine: e, deadline: d.now + toolPausePrefillTimeout}
	if err := e.core.Add(d.now, &sim.Request{ID: p.id, Prompt: prompt, Output: d.fill(1), Priority: priority}); err != nil {
		return // the gateway only logs it
	}
	d.prefilled.Sent++
	d.prefills[p.id] = p
	d.pauses[p.session] = p
	d.deadlines = append(d.deadlines, p)
}

// cancelPrefill aborts p on its engine if it is still there.
func (d *des) cancelPrefill(p *prefill) {
	if p.done {
		return
	}
	if p.engine.core.Abort(d.now, p.id) {
		d.prefilled.Cancelled++
	}
	d.endPrefill(p)
}

// cancelPrefills cancels every prefill still running.
func (d *des) cancelPrefills() {
	for _, p := range d.deadlines {
		d.cancelPrefill(p)
	}
	d.deadlines = d.deadlines[:0]
}

// endPrefill forgets p, which has ended.
func (d *des) endPrefill(p *prefill) {
	p.done = true
	delete(d.prefills, p.id)
	if d.pauses[p.session] == p {
		delete(d.pauses, p.session)
	}
}

// nextDeadline is when the earliest prefill still running times out.
func (d *des) nextDeadline() (time.Duration, bool) {
	for len(d.deadlines) > 0 && d.deadlines[0].done {
		d.deadlines[0] = nil
		d.deadlines = d.deadlines[1:]
	}
	if len(d.deadlines) == 0 {
		return 0, false
	}
	return d.deadlines[0].deadline, true
}

// expirePrefills cancels the prefills whose timeout has passed.
func (d *des) expirePrefills() {
	for {
		at, ok := d.nextDeadline()
		if !ok || at > d.now {
			return
		}
		p := d.deadlines[0]
		if p.engine.core.Abort(d.now, p.id) {
			d.prefilled.TimedOut++
		}
		d.endPrefill(p)
	}
}
