package runtime

import (
	"github.com/hearth-llm/hearth/tokenizer"

	"context"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
)

// vLLM, pinned at v0.33.0 (v0.20.0 still spoken to): `vllm serve MODEL`, KV
// events as maps (positional arrays before v0.23), a host-RAM tier (the
// OffloadingConnector).
func init() {
	Register(&EngineKind{
		Name:    KindVLLM,
		Program: []string{"vllm", "serve"},
		Args:    vllmArgs,
		// Under WSL vLLM leaves pinned host memory off unless told
		// (vllm/platforms/interface.py, is_pin_memory_available), and its V1
		// model runner's buffers, which need it, fail ("UVA is not
		// available"): Hearth sizes the host tier to the pinnable limit and
		// turns pinning on.
		WSLEnv:       []string{"VLLM_WSL2_ENABLE_PIN_MEMORY=1"},
		LivenessPath: "/health",
		MeasureProfile: func(ctx context.Context, client *http.Client, baseURL string, p catalog.Profile) (catalog.Profile, bool) {
			families, err := scrape(ctx, client, baseURL)
			if err != nil {
				return p, false
			}
			labels := firstLabels(families["vllm:cache_config_info"])
			blocks, _ := strconv.Atoi(labels["num_gpu_blocks"])
			size, _ := strconv.Atoi(labels["block_size"])
			if blocks <= 0 || size <= 0 {
				return p, false
			}
			if cpu, err := strconv.Atoi(labels["num_cpu_blocks"]); err == nil && cpu > 0 {
				p.CPUBlocks = cpu
			}
			p.GPUBlocks, p.BlockSize = blocks, size
			return p, true
		},
		// GET /version answers {"version": "0.20.0"}.
		ReadVersion: func(ctx context.Context, client *http.Client, baseURL string) (string, bool) {
			var v struct {
				Version string `json:"version"`
			}
			if getJSON(ctx, client, baseURL+"/version", &v) != nil || v.Version == "" {
				return "", false
			}
			return v.Version, true
		},
		Stats: vllmStats,
		Releases: []EngineRelease{
			// BlockStored names its group's kv_cache_spec_kind and
			// kv_cache_spec_sliding_window after group_idx
			// (vllm/distributed/kv_events.py, read at the untagged
			// 0181ea3173e53eea8cf04a86891488e3dc89bb34; taken as v0.33.0's).
			{Version: "0.33.0", Images: releaseImages(vllmImageRepo, "0.33.0"), EventFormat: kvevents.FormatMap, SpecKinds: true},
			// From v0.23 vllm/distributed/kv_events.py declares its events
			// as maps tagged "type"; up to v0.22 they are array_like,
			// positional arrays tagged by class name.
			{Version: "0.23.0", Images: releaseImages(vllmImageRepo, "0.23.0"), EventFormat: kvevents.FormatMap},
			{Version: "0.20.0", Images: releaseImages(vllmImageRepo, "0.20.0"), EventFormat: kvevents.FormatArray},
		},
		ImageEntrypoint: true, // the image's entrypoint is `vllm serve`
		ImageHTTPPort:   8000,
		MemoryFlag:      "--gpu-memory-utilization",
		MemoryFraction:  func(e catalog.EnginePlan) float64 { return e.GPUMemoryUtilization },
		MemoryShare:     catalog.ShareOfTotal,
		TokenizeChat:    true,
		KVEvents:        true,
		// Hearth does not give vLLM a file-system tier (docs/engine-tiers.md),
		// so KVStoreDir gives vLLM nothing.
		FileTier: nil,
		// --scheduling-policy priority orders the waiting queue, and picks
		// what to preempt, by (priority, arrival), lower values first.
		Priority:         &EnginePriority{Flags: []string{"--scheduling-policy", "priority"}, LowerFirst: true},
		SleepMode:        vllmSleep,
		ToolParsers:      vllmToolParsers,
		ReasoningParsers: qwen3Reasoning,
	})
}

// vllmImageRepo is the repository of vLLM's images.
const vllmImageRepo = "vllm/vllm-openai"

// vllmToolParsers are vLLM's tool-call parsers: Qwen3-Coder, Qwen3.5 and
// Qwen3-Next write their tool calls as XML, the other Qwen3 models as JSON
// in <tool_call> tags.
var vllmToolParsers = map[Family]string{FamilyQwen3Coder: "qwen3_xml", FamilyQwen3Next: "qwen3_xml", FamilyQwen3: "hermes"}

// vllmArgs are the arguments after `vllm serve`: the model first, then KV
// events on (with a replay socket), block size 16, tool-call and reasoning
// parsers for the model's family, and the planned memory and context.
func vllmArgs(spec Spec, p Ports) []string {
	args := []string{modelPath(spec),
		"--served-model-name", spec.Model,
		"--host", p.Host, "--port", strconv.Itoa(p.HTTP),
		"--block-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		// vLLM binds its publisher only to an address with a wildcard;
		// with a host name it would connect instead.
		"--kv-events-config", kvEventsConfig(map[string]any{"enable_kv_cache_events": true}, p),
	}
	k := KindVLLM.Descriptor()
	tool, reasoning := k.Parsers(spec)
	if tool != "" {
		args = append(args, "--enable-auto-tool-choice", "--tool-call-parser", tool)
	}
	if reasoning != "" {
		args = append(args, "--reasoning-parser", reasoning)
	}
	if tp := len(spec.GPUs()); tp > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(tp))
	}
	if spec.GPUMemoryUtilization > 0 {
		args = append(args, k.MemoryFlag, formatFloat(spec.GPUMemoryUtilization))
	}
	if spec.MaxModelLen > 0 {
		args = append(args, "--max-model-len", strconv.Itoa(spec.MaxModelLen))
	}
	if spec.MaxBatchedTokens > 0 {
		// Without it vLLM picks its own by the GPU's memory (2,048 on a
		// 4090), not the budget the plan sized the activations for.
		args = append(args, "--max-num-batched-tokens", strconv.Itoa(spec.MaxBatchedTokens))
	}
	if spec.KVCacheDtype != "" {
		args = append(args, "--kv-cache-dtype", k.KVCacheDtypeFlag(spec.KVCacheDtype))
	}
	if spec.ModelOverrides != "" {
		args = append(args, "--hf-overrides", spec.ModelOverrides)
	}
	args = append(args, k.Priority.Flags...)
	if spec.KVOffloadingGiB > 0 {
		// The OffloadingConnector's CPU tier. Hearth puts no tier below it
		// (v0.20.0 has none; docs/engine-tiers.md), so KVStoreDir gives
		// vLLM nothing.
		args = append(args, "--kv-offloading-size", formatFloat(spec.KVOffloadingGiB), "--kv-offloading-backend", "native")
	}
	return append(args, spec.ExtraArgs...)
}

// vllmStats reads vLLM's metric names.
func vllmStats(families map[string]*dto.MetricFamily) (Stats, bool) {
	if families["vllm:num_requests_running"] == nil {
		return Stats{}, false
	}
	v := func(name string) float64 { return sum(families[name]) }
	return Stats{
		Running: int(v("vllm:num_requests_running")), Waiting: int(v("vllm:num_requests_waiting")),
		KVUsage:       v("vllm:kv_cache_usage_perc"),
		PrefixQueries: int64(v("vllm:prefix_cache_queries_total")), PrefixHits: int64(v("vllm:prefix_cache_hits_total")),
		GenerationTokens: int64(v("vllm:generation_tokens_total")),
		RAMHitTokens:     int64(v("vllm:external_prefix_cache_hits_total")),
	}, true
}
