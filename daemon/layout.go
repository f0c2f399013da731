package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/atomicfile"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
)

// Layouts hearth up chooses between without explicit layout flags
// (--layout): catalog's names, which plan and bench share.
const (
	LayoutAgent  = catalog.LayoutAgent
	LayoutPerGPU = catalog.LayoutPerGPU
)

// LayoutNames lists --layout's values.
func LayoutNames() []string { return catalog.LayoutNames() }

// explicitLayoutFlags are the flags that set the layout themselves: with
// any of them given (command line, environment or configuration file),
// hearth up serves the layout they make and chooses nothing.
var explicitLayoutFlags = []string{"tp", "kv-cache-dtype", "rope-scaling", "max-model-len"}

// How a ServedLayout was chosen.
const (
	ChosenByRule     = "rule"     // --layout agent: catalog.DefaultAgentLayout
	ChosenByMeasure  = "measured" // --agent: the simulation measured the layouts
	ChosenPerGPU     = "per-gpu"  // --layout per-gpu
	ChosenByFlags    = "flags"    // --tp, --kv-cache-dtype, --rope-scaling or --max-model-len
	ChosenByFallback = "fallback" // the agent layout could not be worked out: one engine per GPU
)

// ServedLayout is the layout hearth up serves and why, with the limits
// the agent clients are told for it: what the printed client settings, the
// console and hearth launch read. The daemon writes it to the data
// directory at each start (DataDir.ServedLayout).
type ServedLayout struct {
	// Name is the layout as hearth plan names it ("tp2, fp8 KV, yarn").
	Name   string         `json:"name"`
	Layout catalog.Layout `json:"layout"`
	// Chosen says how: ChosenByRule, ChosenByMeasure, ChosenPerGPU,
	// ChosenByFlags or ChosenByFallback.
	Chosen string `json:"chosen"`
	// Reason says in one line why this layout.
	Reason string `json:"reason"`
	// Alternative names the layout one flag away and how to ask for it.
	Alternative string `json:"alternative,omitempty"`
	// Shortfall, when set, says that the served context leaves the agent
	// clients too little room, and what would give more.
	Shortfall string `json:"shortfall,omitempty"`
	// ContextTokens is the context each session is served (every engine's
	// max_model_len); OutputTokens the output cap clients are told
	// (agentclient.OutputTokens); ClaudeCompactWindow Claude Code's
	// CLAUDE_CODE_AUTO_COMPACT_WINDOW for it
	// (agentclient.ClaudeCodeCompactWindow).
	ContextTokens       int `json:"context_tokens"`
	OutputTokens        int `json:"output_tokens"`
	ClaudeCompactWindow int `json:"claude_compact_window"`
}

// Line is the layout in one line, as hearth up prints it.
func (s ServedLayout) Line() string {
	line := fmt.Sprintf("layout %s (%s-token context): %s", s.Name, humanize.Comma(int64(s.ContextTokens)), s.Reason)
	if s.Alternative != "" {
		line += "; " + s.Alternative
	}
	return line
}

// withContext completes s with the context the engines were planned with.
// and the shortfall it leaves the clients ("" for none), unless s says
// one already.
func (s ServedLayout) withContext(contextTokens int, shortfall string) ServedLayout {
	s.ContextTokens = contextTokens
	s.OutputTokens = agentclient.OutputTokens(contextTokens)
	s.ClaudeCompactWindow = agentclient.ClaudeCodeCompactWindow(contextTokens)
	if s.Shortfall == "" {
		s.Shortfall = shortfall
	}
	return s
}

// chooseLayout sets cfg's layout for the GPUs it serves from, unless the
// command line set it (explicit layout flags, or hearth up --agent, which
// measured it): by rule for the agent clients (--layout agent, the
// default; for --agent's client, else Claude Code, whose first prompt is
// the largest), or one engine per GPU (--layout per-gpu). The context is
// filled in once the engines are planned (withContext).
func chooseLayout(cfg *Config, gpus []nodes.GPU) (ServedLayout, error) {
	current := func(chosen, reason, alternative string) ServedLayout {
		l := layoutOf(*cfg)
		return ServedLayout{Name: l.String(), Layout: l, Chosen: chosen, Reason: reason, Alternative: alternative}
	}
	switch {
	case cfg.measured != nil:
		return *cfg.measured, nil
	case len(cfg.cmdline.layoutGiven) > 0:
		return current(ChosenByFlags, "as --"+cfg.cmdline.layoutGiven[0]+" and the other layout flags give it", ""), nil
	case cfg.Layout == LayoutPerGPU:
		return current(ChosenPerGPU, "--layout per-gpu, one engine per GPU", "--layout agent for the layout for coding agents"), nil
	case len(cfg.Models) > 1:
		return current(ChosenByFallback, "several models, one engine per GPU each in turn", ""), nil
	}
	model, ok := catalog.LookupModel(cfg.Model)
	if !ok {
		return current(ChosenByFallback, fmt.Sprintf("one engine per GPU: the catalog has no figures of %s to choose a layout from", cfg.Model), ""), nil
	}
	client := cfg.Agent.Client
	if client == "" {
		client = catalog.ClaudeCodeID
	}
	choice, err := catalog.DefaultAgentLayout(nodes.PlannerUses(gpus), model, client)
	if errors.Is(err, catalog.ErrNoAgentLayout) {
		return ServedLayout{}, fmt.Errorf("up: %w", err)
	}
	if err != nil {
		return ServedLayout{}, fmt.Errorf("up: the layout for coding agents: %w", err)
	}
	l := choice.Candidate.Layout
	cfg.TP, cfg.KVCacheDtype, cfg.RopeScaling, cfg.MaxBatchedTokens = l.TPSize(), l.KVCacheDtypeOrAuto(), l.RopeScaling, l.MaxBatchedTokens
	s := ServedLayout{Name: l.String(), Layout: l, Chosen: ChosenByRule, Reason: choice.Reason, Shortfall: choice.Shortfall}
	if p := choice.PerGPU; p.Plan.MaxModelLen > 0 && !p.Layout.SameEngines(l) {
		s.Alternative = "--layout per-gpu for one engine per GPU"
	}
	return s, nil
}

// layoutGivenIn names the explicit layout flags among settings that were
// set by the command line, the environment or the configuration file.
func layoutGivenIn(set func(name string) bool) []string {
	var given []string
	for _, name := range explicitLayoutFlags {
		if set(name) {
			given = append(given, name)
		}
	}
	return given
}

// ServedLayout is the file the daemon writes the layout it serves to at
// each start (ServedLayout, as JSON), for the commands that set up the
// agent clients.
func (d DataDir) ServedLayout() string { return d.join("layout.json") }

// writeServedLayout records s in the data directory.
func writeServedLayout(d DataDir, s ServedLayout) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("up: served layout: %w", err)
	}
	if err := atomicfile.Write(d.ServedLayout(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("up: served layout: %w", err)
	}
	return nil
}

// ReadServedLayout reads the layout the daemon of data directory d last
// started with.
func ReadServedLayout(d DataDir) (ServedLayout, error) {
	var s ServedLayout
	b, err := os.ReadFile(d.ServedLayout())
	if err != nil {
		return s, fmt.Errorf("served layout: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("served layout: %s: %w", d.ServedLayout(), err)
	}
	return s, nil
}
