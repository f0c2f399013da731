package catalog

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// GPUUseOf is a GPU as the planner sees it, from what discovery reports:
// the catalog's board for its kind, else the board its name describes,
// sized by the memory the GPU reports (a driver reports a little less than
// the box says), and the memory other programs hold on it.
func GPUUseOf(kind, name string, memoryTotal, memoryUsed uint64) GPUUse {
	board, ok := LookupGPU(kind)
	if !ok {
		board = GPUByName(name, memoryTotal)
	}
	if memoryTotal != 0 {
		board.MemoryBytes = memoryTotal
	}
	return GPUUse{GPU: board, UsedBytes: memoryUsed}
}

// ModelRepo is the Hugging Face repository of a catalog model, or the name
// itself.
func ModelRepo(name string) string {
	if m, ok := LookupModel(name); ok {
		return m.Repo
	}
	return name
}

// EngineMemory is what the plan sets on one real engine.
type EngineMemory struct {
	// Engine is the plan of the engine; its kind picks the value of its
	// own memory flag from it (vLLM's --gpu-memory-utilization, SGLang's
	// --mem-fraction-static).
	Engine      EnginePlan
	MaxModelLen int
	// MaxBatchedTokens is the step token budget the plan sized the
	// engine's activation peak for (vLLM's --max-num-batched-tokens).
	MaxBatchedTokens int
	// KVCacheBytes is the engine's GPU KV cache.
	KVCacheBytes float64
	// Note says what other programs' memory cost the engine, "" when they
	// hold none or it cost nothing.
	Note string
}

// PlanEngineMemory plans one engine serving repo (a catalog name or a Hugging Face repository, read from the
// cache hub when the catalog lacks it) tensor-parallel over gpus, with at
// most maxModelLen of context (0: the longest that fits), its KV cache
// dtype, rope scaling and step budget as layout says (its TP is len(gpus)). ok is false when
// there is nothing to plan with: a GPU of unknown size (named by index,
// without discovery) or a model Hearth has no shape for; the engine then
// keeps its own defaults. A model that does not fit is an error with the
// plan's sentence.
func PlanEngineMemory(repo, hub string, gpus []GPUUse, maxModelLen int, layout Layout) (plan EngineMemory, ok bool, err error) {
	for _, g := range gpus {
		if g.GPU.MemoryBytes == 0 {
			return EngineMemory{}, false, nil
		}
	}
	model, err := ResolveModel(repo, hub)
	if err != nil {
		return EngineMemory{}, false, nil // the engine reads the model itself
	}
	layout.TP = len(gpus)
	if model, err = ApplyLayout(model, layout); err != nil {
		return EngineMemory{}, false, err
	}
	req := PlanRequest{GPUs: gpus, Model: model, TP: len(gpus), MaxModelLen: maxModelLen, KVCacheDtype: layout.KVCacheDtype, MaxBatchedTokens: layout.MaxBatchedTokens}
	p, err := PlanEngines(req)
	if err != nil {
		return EngineMemory{}, false, err
	}
	e := p.Engines[0]
	return EngineMemory{
		Engine: e, MaxModelLen: e.MaxModelLen, MaxBatchedTokens: p.MaxBatchedTokens,
		KVCacheBytes: e.KVCacheBytes(), Note: otherProgramsNote(req, e),
	}, true, nil
}

// otherProgramsNote says what other programs' memory cost an engine, ""
// when they hold none or it cost nothing.
func otherProgramsNote(req PlanRequest, got EnginePlan) string {
	gpus := make([]GPUUse, len(req.GPUs))
	var other uint64
	for i, u := range req.GPUs {
		other += u.UsedBytes
		gpus[i] = GPUUse{GPU: u.GPU}
	}
	if other == 0 {
		return ""
	}
	req.GPUs = gpus
	whole, err := PlanEngines(req)
	if err != nil || whole.Engines[0].KVTokens <= got.KVTokens {
		return ""
	}
	note := fmt.Sprintf("other programs hold %.1f GiB of this GPU: KV cache for %s tokens instead of %s", float64(other)/(1<<30), humanize.Comma(int64(got.KVTokens)), humanize.Comma(int64(whole.Engines[0].KVTokens)))
	if got.MaxModelLen < whole.Engines[0].MaxModelLen {
		note += fmt.Sprintf(", context cut to %s", humanize.Comma(int64(got.MaxModelLen)))
	}
	return note
}

// AgentClient is a coding-agent client and the tokens of its first prompt:
// system prompt and tool definitions, which every turn of its sessions
// repeats. ID is its name on the command line (hearth up --agent, hearth
// plan --agent) and its workload's in the benchmark (bench's preset).
type AgentClient struct {
	ID                string
	Name              string
	FirstPromptTokens int
}

// AgentClients are the clients Hearth serves, largest first prompt first:
// their recorded first turns replayed through Hearth's gateway and the
// Qwen3 chat template (api/testdata/client-shapes.json; bench's
// TestClientPresetsFollowCaptures holds these figures to it).
var AgentClients = []AgentClient{
	{"claude-code", "Claude Code", 19839},
	{"codex", "Codex", 8615},
	{"opencode", "OpenCode", 7199},
}

// AgentClientIDs lists the AgentClients' IDs.
func AgentClientIDs() []string {
	ids := make([]string, len(AgentClients))
	for i, c := range AgentClients {
		ids[i] = c.ID
	}
	return ids
}

// ContextShortfall says in one sentence which agent clients' first prompts
// do not fit a context of maxModelLen tokens and what would give more, ""
// when all fit.
func ContextShortfall(maxModelLen int) string {
	var short []string
	for _, c := range AgentClients {
		if c.FirstPromptTokens >= maxModelLen {
			short = append(short, fmt.Sprintf("%s's (%.1fk tokens)", c.Name, float64(c.FirstPromptTokens)/1000))
		}
	}
	if len(short) == 0 {
		for _, c := range AgentClients {
			if c.FirstPromptTokens+AgentTurnTokens > maxModelLen {
				return fmt.Sprintf("the planned context of %s tokens leaves %s under %s tokens after its %.1fk-token first prompt: --tp 2 or --kv-cache-dtype fp8 give more",
					humanize.Comma(int64(maxModelLen)), c.Name, humanize.Comma(int64(AgentTurnTokens)), float64(c.FirstPromptTokens)/1000)
			}
		}
		return ""
	}
	return fmt.Sprintf("the planned context of %s tokens is shorter than the first prompt of %s: --tp 2 or --kv-cache-dtype fp8 give more",
		humanize.Comma(int64(maxModelLen)), strings.Join(short, ", "))
}
