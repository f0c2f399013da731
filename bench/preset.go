package bench

import (
	"slices"
	"time"
)

// Preset is a named workload for a commonly published setup: the agentic
// config and the engines' context it assumes.
type Preset struct {
	Name        string
	Description string
	// Agentic is the workload's config; flags a user sets override its
	// fields.
	Agentic AgenticConfig
	// MaxModelLen is every engine's max_model_len for the setup.
	MaxModelLen int
}

// Presets are the workloads --workload names.
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
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

// PresetNames lists the presets' names.
func PresetNames() []string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return names
}
