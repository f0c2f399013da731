package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
)

// runBench compares routing policies on an agentic workload or a trace,
// on a simulated cluster in virtual time or against a live server.
func runBench(ctx context.Context, env *environment, args []string) error {
	if len(args) > 0 && args[0] == "plot" {
		return runBenchPlot(ctx, env, args[1:])
	}
	if len(args) == 0 || (args[0] != "agentic" && args[0] != "trace") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			printBenchUsage(env.stdout)
			return nil
		}
		printBenchUsage(env.stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: bench needs a workload: agentic or trace", errUsage)
		}
		return fmt.Errorf("%w: unknown workload %q (want agentic or trace)", errUsage, args[0])
	}
	f := bench.NewFlags(args[0])
	fs := newFlagSet(env, "bench "+args[0], "bench "+args[0]+" [flags]")
	f.Register(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	err := runBenchFlags(ctx, env, f, flagsSet(fs))
	if bad, ok := err.(*bench.ConfigError); ok {
		return fmt.Errorf("%w: %v", errUsage, bad.Err)
	}
	return err
}

// runBenchFlags runs what the flags ask for, on the simulated GPUs of --sim
// in the layout hearth up would serve unless a flag or preset sets one.
func runBenchFlags(ctx context.Context, env *environment, f *bench.Flags, set map[string]bool) error {
	r, err := f.Prepare(set, env.stdout, env.stderr)
	if err != nil {
		return err
	}
	if r.Swap != nil {
		gpus, err := nodes.ParseSimSpec(r.SimSpec)
		if err != nil {
			return fmt.Errorf("%w: --sim: %v", errUsage, err)
		}
		r.Swap.GPU = gpus[0].Kind
		return bench.RunSwapReport(ctx, *r.Swap, r.SwapPolicies, env.stdout, r.Comparison.JSONPath)
	}
	if r.SimSpec != "" {
		gpus, err := nodes.ParseSimSpec(r.SimSpec)
		if err != nil {
			return fmt.Errorf("%w: --sim: %v", errUsage, err)
		}
		for _, g := range gpus {
			r.Comparison.GPUs = append(r.Comparison.GPUs, g.Kind)
		}
		if r.DefaultLayout {
			if err := chooseBenchLayout(&r, gpus, env.stdout); err != nil {
				return err
			}
		}
	}
	if r.Trace != nil {
		return bench.RunTrace(ctx, r.Comparison, *r.Trace)
	}
	return bench.RunAgentic(ctx, r.Comparison, r.Agentic, r.Levels)
}

// chooseBenchLayout sets a simulation's layout as hearth up chooses it:
// the layout for coding agents (catalog.DefaultAgentLayout) for the
// preset's client, said in one line.
func chooseBenchLayout(r *bench.Run, gpus []nodes.GPU, out io.Writer) error {
	model, ok := catalog.LookupModel(r.Model)
	if !ok {
		return fmt.Errorf("%w: --model %q is not simulated", errUsage, r.Model)
	}
	choice, err := catalog.DefaultAgentLayout(nodes.PlannerUses(gpus), model, r.Client)
	if err != nil {
		return err
	}
	l, c := choice.Candidate.Layout, &r.Comparison
	c.TP, c.KVCacheDtype, c.RopeScaling, c.MaxBatchedTokens = l.TPSize(), l.KVCacheDtypeOrAuto(), l.RopeScaling, l.MaxBatchedTokens
	fmt.Fprintf(out, "layout %s (%s), as hearth up serves it; --layout per-gpu for one engine per GPU\n", l, choice.Reason)
	if choice.Shortfall != "" {
		fmt.Fprintln(out, choice.Shortfall)
	}
	return nil
}

func printBenchUsage(w io.Writer) {
	fmt.Fprintln(w, `Usage: hearth bench agentic [flags]
       hearth bench trace --trace FILE [flags]
       hearth bench plot --csv FILE --out FILE.svg

Runs routing policies side by side on the same workload: on a simulated
cluster in virtual time (--sim, the default) or against a live
OpenAI-compatible server (--target). Run 'hearth bench agentic --help'
for the flags. 'hearth bench agentic --swap-model MODEL' compares
instead how models that do not fit one GPU together take turns on it:
Hearth's policy, stop/start on every switch, and both pinned. 'hearth
bench plot' draws samples over time (the CSV scripts/soak writes) as an
SVG chart.`)
}
