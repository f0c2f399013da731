package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// Comparison is what hearth bench runs: routing policies side by side on
// one workload, on a simulated cluster in virtual time or against a live
// server, once per seed. RunAgentic and RunTrace run it on their workload.
type Comparison struct {
	// Policies are run in this order at each concurrency level.
	Policies []string
	// Target is a live server's OpenAI base URL ("" to simulate); APIKey
	// goes with it. Model is the live server's model id ("" its first) or
	// the simulated model ("" DefaultSimModel).
	Target string
	Model  string
	APIKey string
	// GPUs are the simulated cluster's GPU kinds, one engine each.
	GPUs []string
	// EventLatency delays KV events from engine to router (0: none).
	EventLatency time.Duration
	// KVOffloadingGiB is each simulated engine's host-RAM KV tier (0: off);
	// Tiers says which tiers below the GPU there are (kvbm.TiersOff,
	// TiersRAM, TiersRAMSSD), StoreDir where ram+ssd runs keep their node
	// store ("": the system's temp directory) and DiskGBps its bandwidth.
	KVOffloadingGiB float64
	Tiers           string
	StoreDir        string
	DiskGBps        float64
	// RestartAt restarts every simulated engine this far into a run (0:
	// never).
	RestartAt time.Duration
	// InferHints is SimConfig.InferHints and SimConfig.InferOSL together,
	// as hearth up --infer-hints turns both (hearth bench --infer-hints); a
	// live run reports the gateway's output length estimates from its
	// x-hearth-osl header whatever it says.
	InferHints bool
	// WarmStart is SimConfig.WarmStart: the simulated engines start with
	// the prefixes learned from earlier sessions prefilled.
	WarmStart bool
	// MaxModelLen is every simulated engine's max_model_len (0: the
	// model's).
	MaxModelLen int
	// TP is the simulated engines' tensor parallel size: one engine per TP
	// GPUs (0: one per GPU); KVCacheDtype their KV cache dtype ("": auto).
	TP           int
	KVCacheDtype string
	// RopeScaling serves the model's YaRN context where it has one
	// (catalog.Model.RopeScalingJSON), as hearth up --rope-scaling does.
	RopeScaling bool
	// MaxBatchedTokens is the simulated engines' step token budget, the
	// layout's (catalog.Layout.MaxBatchedTokens; 0: the engines' default,
	// catalog.DefaultMaxBatchedTokens).
	MaxBatchedTokens int
	// Seed is the first run's seed; Runs runs use Seed, Seed+1, ... and are
	// reported by their spread when there are several.
	Seed uint64
	Runs int
	// JSONPath and PlotPath, when set, also get the report as JSON and a
	// chart as SVG.
	JSONPath string
	PlotPath string
	// Out gets the tables and notes; Progress, when it is a terminal, a
	// progress bar.
	Out      io.Writer
	Progress io.Writer
}

// A ConfigError is a Comparison or a workload that cannot run: a bad value
// or values that do not fit together, found before any run starts. hearth
// bench reports it as a usage error.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// RunAgentic compares the policies on the agentic workload w (its Seed and
// Sessions are set per run) at each concurrency level.
//
// A workload that compacts (AgenticConfig.Compaction) without a
// MaxContextTokens of its own keeps its sessions within the simulated
// engines' max_model_len; against a live server it never compacts, since
// the server's context is not known.
func RunAgentic(ctx context.Context, c Comparison, w AgenticConfig, levels []int) error {
	if w.Compaction != nil && w.MaxContextTokens == 0 && c.Target == "" {
		runner, err := c.runner(ctx, c.Seed)
		if err != nil {
			return err
		}
		w.MaxContextTokens = runner.(*Sim).MaxModelLen()
	}
	return c.run(ctx, "agentic", func(seed uint64) (Plan, Workload, error) {
		cfg := w
		cfg.Seed = seed
		// Check the config once, so that a bad value is a ConfigError.
		cfg.Sessions = levels[0]
		first, err := NewAgentic(cfg)
		if err != nil {
			return Plan{}, nil, &ConfigError{err}
		}
		return Plan{Levels: levels, Workload: func(level int) (Workload, error) {
			c := cfg
			c.Sessions = level
			return NewAgentic(c)
		}}, first, nil
	})
}

// RunTrace compares the policies on the trace of t (its Seed is set per
// run), read from t.Path.
func RunTrace(ctx context.Context, c Comparison, t TraceConfig) error {
	return c.run(ctx, "trace", func(seed uint64) (Plan, Workload, error) {
		recs, err := ReadTraceFile(t.Path)
		if err != nil {
			return Plan{}, nil, err
		}
		cfg := t
		cfg.Seed = seed
		tr, err := NewTrace(recs, cfg)
		if err != nil {
			return Plan{}, nil, &ConfigError{err}
		}
		return Plan{Levels: []int{0}, Workload: func(int) (Workload, error) { return tr, nil }}, tr, nil
	})
}

// run runs the comparison once per seed, workload making each seed's plan
// (without its policies) and the workload the report describes.
func (c Comparison) run(ctx context.Context, kind string, workload func(seed uint64) (Plan, Workload, error)) error {
	var report Report
	var notes []string
	var runErr error
	for i := range c.Runs {
		seed := c.Seed + uint64(i)
		plan, w, err := workload(seed)
		if err != nil {
			return err
		}
		plan.Policies = c.Policies
		runner, err := c.runner(ctx, seed)
		if err != nil {
			return err
		}
		if i == 0 {
			report.Workload = w
		}
		if c.Progress != nil && isTerminal(c.Progress) {
			plan.Progress = NewProgress(c.Progress, true)
		}
		var sn *simNotes
		if s, ok := runner.(*Sim); ok {
			if i == 0 {
				fmt.Fprintln(c.Out, s.Describe())
			}
			sn = &simNotes{sim: s}
			runner = sn
		} else if i == 0 {
			fmt.Fprintf(c.Out, "live target %s\n", c.Target)
		}
		runs, err := RunPlan(ctx, plan, runner)
		for j := range runs {
			runs[j].Seed = seed
		}
		report.Runs = append(report.Runs, runs...)
		if sn != nil {
			for _, line := range sn.lines {
				if c.Runs > 1 {
					line = fmt.Sprintf("seed %d: %s", seed, line)
				}
				notes = append(notes, line)
			}
		}
		if c.Runs == 1 && len(runs) > 0 {
			if err := WriteTable(c.Out, runs); err != nil {
				return err
			}
		}
		if err != nil {
			runErr = err
			break
		}
	}
	if len(report.Runs) == 0 {
		return runErr
	}
	if c.Runs > 1 {
		report.Spread = Spreads(report.Runs)
		fmt.Fprintf(c.Out, "%d runs, seeds %d to %d\n", c.Runs, c.Seed, c.Seed+uint64(c.Runs)-1)
		if err := WriteSpreadTable(c.Out, report.Spread); err != nil {
			return err
		}
	}
	for _, line := range notes {
		fmt.Fprintln(c.Out, line)
	}
	if c.Runs > 1 {
		writeOutputLengthSpread(c.Out, report.Runs)
	}
	if err := c.writeFiles(kind, report); err != nil {
		return err
	}
	return runErr
}

// runner is the live server, or a simulated cluster for seed.
func (c Comparison) runner(ctx context.Context, seed uint64) (Runner, error) {
	if c.Target != "" {
		l, err := NewLive(LiveConfig{Target: c.Target, Model: c.Model, APIKey: c.APIKey})
		if err != nil {
			return nil, &ConfigError{err}
		}
		if _, err := l.ResolveModel(ctx); err != nil {
			return nil, err
		}
		return l, nil
	}
	latency := c.EventLatency
	if latency == 0 {
		latency = -1 // zero means none here, not the default
	}
	offload := c.KVOffloadingGiB
	if offload == 0 || c.Tiers == kvbm.TiersOff {
		offload = -1 // zero means off here, not the default
	}
	storeDir := ""
	if c.Tiers == kvbm.TiersRAMSSD {
		storeDir = c.StoreDir
		if storeDir == "" {
			storeDir = filepath.Join(os.TempDir(), "hearth-bench-kvstore")
		}
	}
	engine := sim.Config{MaxModelLen: c.MaxModelLen, TP: c.TP, KVCacheDtype: c.KVCacheDtype, MaxNumBatchedTokens: c.MaxBatchedTokens}
	if c.RopeScaling {
		name := c.Model
		if name == "" {
			name = DefaultSimModel
		}
		m, ok := catalog.LookupModel(name)
		if engine.ModelOverrides = m.RopeScalingJSON(); !ok || engine.ModelOverrides == "" {
			return nil, &ConfigError{fmt.Errorf("--rope-scaling: %s has no longer context with rope scaling", name)}
		}
	}
	s, err := NewSim(SimConfig{GPUs: c.GPUs, Model: c.Model, EventLatency: latency,
		KVOffloadingGiB: offload, StoreDir: storeDir, DiskGBps: c.DiskGBps, RestartAt: c.RestartAt,
		InferOSL: c.InferHints, Seed: int64(seed), Engine: engine,
		InferHints: c.InferHints, WarmStart: c.WarmStart})
	if err != nil {
		return nil, &ConfigError{err}
	}
	return s, nil
}

// simNotes runs simulations for RunPlan and keeps what the table does not
// show: how many requests waited for a worker.
type simNotes struct {
	sim   *Sim
	lines []string
}

func (n *simNotes) RunSummary(ctx context.Context, w Workload, policy string, sessions int, progress func(ProgressState)) (RunSummary, error) {
	run, err := n.sim.Run(ctx, w, policy, sessions, progress)
	if err != nil {
		return RunSummary{}, err
	}
	if run.Queued > 0 {
		at := fmt.Sprintf("at %d sessions", sessions)
		if sessions == 0 {
			at = "on the trace"
		}
		n.lines = append(n.lines, fmt.Sprintf("%s %s: %d requests waited for a worker (queue peak %d)", policy, at, run.Queued, run.MaxQueue))
	}
	if s := run.Summary; s.RAMCachedTokens+s.SSDCachedTokens > 0 {
		n.lines = append(n.lines, fmt.Sprintf("%s at %d sessions: prompt tokens loaded instead of recomputed: %d from host RAM, %d from the node SSD store",
			policy, sessions, s.RAMCachedTokens, s.SSDCachedTokens))
	}
	if r := run.Restart; r != nil {
		n.lines = append(n.lines, fmt.Sprintf("%s at %d sessions: after the restart at %v, %d sessions' next turns did not recompute %.1f%% of their %d context tokens (%.1f%% loaded from the node SSD store by the turn itself, the rest found on the GPU)",
			policy, sessions, r.At, r.Turns, 100*r.ReusedShare(), r.ContextTokens, 100*r.SSDShare()))
	}
	return run.Summary, nil
}

// writeFiles writes the JSON report and the chart, if asked for.
func (c Comparison) writeFiles(kind string, report Report) error {
	if c.JSONPath != "" {
		if err := writeFile(c.JSONPath, func(w io.Writer) error { return WriteJSON(w, report) }); err != nil {
			return err
		}
	}
	if c.PlotPath != "" {
		title := "TTFT, slowest turn and task time by policy, " + kind
		if err := writeFile(c.PlotPath, func(w io.Writer) error { return WriteSVG(w, title, report.Runs) }); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := write(file); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// isTerminal reports whether w is a character device, where a progress bar
// makes sense.
func isTerminal(w io.Writer) bool {
	file, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	if err != nil {
		return false
	}
	return st.Mode()&os.ModeCharDevice != 0
}
