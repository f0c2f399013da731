package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/catalog"
)

// Preset is a named workload for a commonly published setup or for the
// shape of a coding-agent client: the agentic config and the engines'
// context it assumes.
type Preset struct {
	Name        string
	Description string
	// Agentic is the workload's config; flags a user sets override its
	// fields.
	Agentic AgenticConfig
	// MaxModelLen is every engine's max_model_len for the setup; 0 for a
	// client preset, which runs on the engines' own context and compacts
	// to stay within it.
	MaxModelLen int
}

// Workload returns the preset's workload under seed at a concurrency of
// sessions, for engines whose max_model_len is maxModelLen: a client
// preset compacts its sessions' histories to fit it (0: never).
func (p Preset) Workload(seed uint64, sessions, maxModelLen int) (*Agentic, error) {
	cfg := p.Agentic
	cfg.Seed, cfg.Sessions = seed, sessions
	if cfg.Compaction != nil && cfg.MaxContextTokens == 0 {
		cfg.MaxContextTokens = maxModelLen
	}
	if cfg.Compaction != nil && cfg.Client == catalog.ClaudeCodeID && cfg.MaxContextTokens > 0 {
		// Claude Code compacts where the settings Hearth prints make it:
		// CLAUDE_CODE_AUTO_COMPACT_WINDOW and the output cap for the
		// served context, less its own buffer.
		cp := *cfg.Compaction
		cp.AboveTokens = agentclient.ClaudeCodeCompactThreshold(cfg.MaxContextTokens)
		cfg.Compaction = &cp
	}
	return NewAgentic(cfg)
}

// The coding-agent clients' shapes, as Hearth's gateway and the Qwen3
// template turn their recorded requests into prompts (api's
// TestCaptureShapes measures them from the recorded sessions into
// api/testdata/client-shapes.json; TestClientPresetsFollowCaptures holds
// these figures to it). docs/perf-history.md, "Client-shaped workloads",
// says which figure comes from which recording and what is assumed.
const (
	// Claude Code 2.1.197 (captures claude-run1, claude-run2): a first
	// prompt of 19,839 tokens, of which the two sessions share 19,824 (the
	// system prompt, 26 tool definitions of 17,043 tokens and the first
	// messages; both sessions asked the same question).
	claudeCodePrefixTokens = 19824
	claudeCodeTaskTokens   = 15
	// Codex CLI 0.171.0 (codex-run1, codex-run2): 8,615 tokens, 8,608
	// shared (instructions, developer messages, 9 tools of 4,379 tokens).
	codexPrefixTokens = 8608
	codexTaskTokens   = 7
	// OpenCode 1.18.33 (opencode-run1, opencode-run2): 7,199 tokens, 7,184
	// shared (system prompt, 10 tools of 5,166 tokens); and the title
	// request sent before the first turn, 538 tokens, 528 shared.
	openCodePrefixTokens      = 7184
	openCodeTaskTokens        = 15
	openCodeTitlePrefixTokens = 528
)

// clientPreset is the shape every client preset shares around its own
// prefix and task: the loop's growth per turn, its tool pauses and the
// compaction, which the recordings (one short task each) do not measure;
// docs/perf-history.md states these assumptions.
func clientPreset(client string, prefix, task int, instruction int) AgenticConfig {
	return AgenticConfig{
		Client:       client,
		PrefixTokens: prefix,
		// The task a user types varies around the recorded one.
		TaskTokens:   IntRange{Min: task, Max: task + 200},
		Steps:        10,
		MaxSteps:     30,
		AnswerTokens: DefaultAnswerTokens,
		ResultTokens: DefaultResultTokens,
		ToolPause:    DefaultToolPause,
		Compaction: &Compaction{
			InstructionTokens: instruction,
			SummaryTokens:     IntRange{Min: 1000, Max: 2000},
		},
	}
}

// Presets are the workloads --preset names.
var Presets = []Preset{
	{
		Name: "coding-agent-8k",
		Description: "a coding agent on engines at max_model_len 8192: one 6,000-token prefix " +
			"(system prompt and four tool definitions) in every session, a task of 50-150, 4-6 ReAct steps " +
			"(fewer when the next would not fit the context), " +
			"tool results of 100-400 tokens, answers of 100-300, tool pauses of 1-10 s",
		Agentic: AgenticConfig{
			PrefixTokens:     6000,
			TaskTokens:       IntRange{Min: 50, Max: 150}, // a short task: the context is tight
			Steps:            4,
			MaxSteps:         6,
			ResultTokens:     IntRange{Min: 100, Max: 400},
			AnswerTokens:     IntRange{Min: 100, Max: 300},
			ToolPause:        Uniform{Min: time.Second, Max: 10 * time.Second},
			MaxContextTokens: 8192,
		},
		MaxModelLen: 8192,
	},
	{
		Name: "claude-code",
		Description: "Claude Code as recorded: a 19,824-token prefix (system prompt and 26 tools) shared by every " +
			"session, a task of 15-215, 10-30 turns, compacting when the next turn would not fit the engines' context",
		Agentic: clientPreset("claude-code", claudeCodePrefixTokens, claudeCodeTaskTokens, 1000),
	},
	{
		Name: "codex",
		Description: "Codex CLI as recorded: an 8,608-token prefix (instructions and 9 tools) shared by every " +
			"session, a task of 7-207, 10-30 turns, compacting when the next turn would not fit the engines' context",
		Agentic: clientPreset("codex", codexPrefixTokens, codexTaskTokens, 200),
	},
	{
		Name: "opencode",
		Description: "OpenCode as recorded: a 7,184-token prefix (system prompt and 10 tools) shared by every " +
			"session, a task of 15-215 and a title request beside the first turn, 10-30 turns, " +
			"compacting when the next turn would not fit the engines' context",
		Agentic: func() AgenticConfig {
			c := clientPreset("opencode", openCodePrefixTokens, openCodeTaskTokens, 200)
			c.SideRequests = []SideRequest{{Name: "title", PrefixTokens: openCodeTitlePrefixTokens, AnswerTokens: IntRange{Min: 5, Max: 20}}}
			return c
		}(),
	},
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

// PresetByName is LookupPreset with an error that lists the known names.
func PresetByName(name string) (Preset, error) {
	p, ok := LookupPreset(name)
	if !ok {
		return Preset{}, fmt.Errorf("bench: unknown preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// PresetNames lists the presets' names.
func PresetNames() []string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return names
}

// ClientPresetNames lists the presets shaped after a coding-agent client:
// claude-code, codex, opencode.
func ClientPresetNames() []string {
	var names []string
	for _, p := range Presets {
		if p.Agentic.Client != "" {
			names = append(names, p.Name)
		}
	}
	return names
}
