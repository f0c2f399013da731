package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Runner runs one workload under one policy and summarises it as
// concurrency level sessions (0 for a trace). progress, if not nil, is
// called as requests end. *Sim and *Live are Runners.
type Runner interface {
	RunSummary(ctx context.Context, w Workload, policy string, sessions int, progress func(ProgressState)) (RunSummary, error)
}

var (
	_ Runner = (*Sim)(nil)
	_ Runner = (*Live)(nil)
)

// Plan is a side-by-side comparison: every policy at every concurrency
// level, each on the identical workload of that level.
type Plan struct {
	// Policies are run in this order at each level.
	Policies []string
	// Levels are the concurrency levels; a trace has the single level 0.
	Levels []int
	// Workload returns the workload of a level. It is called once per
	// level; every policy then drives its own Driver of that workload, so
	// all of them see the same requests (same seed).
	Workload func(level int) (Workload, error)
	// Progress, if not nil, shows each run; Finish is called when a run
	// ends.
	Progress *Progress
}

// ErrBadPlan is wrapped by errors about a Plan.
var ErrBadPlan = errors.New("bad benchmark plan")

// RunPlan runs the plan and returns one summary per run, level by level.
// On an error (or ctx ending) it returns the runs completed so far with it.
func RunPlan(ctx context.Context, p Plan, r Runner) ([]RunSummary, error) {
	if len(p.Policies) == 0 || len(p.Levels) == 0 || p.Workload == nil {
		return nil, fmt.Errorf("bench: %w: need policies, levels and a workload", ErrBadPlan)
	}
	var runs []RunSummary
	for _, level := range p.Levels {
		w, err := p.Workload(level)
		if err != nil {
			return runs, err
		}
		for _, policy := range p.Policies {
			var progress func(ProgressState)
			var last ProgressState
			if p.Progress != nil {
				progress = func(s ProgressState) { last = s; p.Progress.Update(s) }
			}
			sum, err := r.RunSummary(ctx, w, policy, level, progress)
			if p.Progress != nil {
				p.Progress.Finish(last)
			}
			if err != nil {
				return runs, fmt.Errorf("bench: %s at %d sessions: %w", policy, level, err)
			}
			runs = append(runs, sum)
		}
	}
	return runs, nil
}

// endsSession reports whether req, having ended, ends a session for a
// progress display: a trace request always does; an agentic request does
// when it is its session's last turn or failed, a subagent's never.
func endsSession(req *Request, failed bool) bool {
	if strings.Contains(req.Session, ".") {
		return false
	}
	return failed || req.Last
}
