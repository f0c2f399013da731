package runtime

import (
	"github.com/hearth-llm/hearth/tokenizer"

	"context"
	"math"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
)

// SGLangHostKeepFree is the host RAM SGLang keeps free of its HiCache
// host pool (EngineKind.HostTierKeepFree): 10 GiB.
const SGLangHostKeepFree = 10 << 30

// SGLangFileStorageDirEnv is the variable from which SGLang's HiCache file
// backend takes its directory.
const SGLangFileStorageDirEnv = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"

// SGLang, pinned at v0.5.23 (v0.5.19 still spoken to): `python3 -m
// sglang.launch_server`, KV events as maps (positional up to v0.5.19),
// HiCache's host tier and its "file" storage backend below it.
func init() {
	Register(&EngineKind{
		Name:    KindSGLang,
		Program: []string{"python3", "-m", "sglang.launch_server"},
		Args:    sglangArgs,
		// SGLang's file storage backend takes its directory only from the
		// environment.
		Env: func(spec Spec) []string {
			if spec.UsesKVStore() {
				return []string{SGLangFileStorageDirEnv + "=" + spec.KVStoreDir}
			}
			return nil
		},
		// SGLang's HTTP server can outlive a crashed scheduler and keep
		// answering /health; /health_generate runs a one-token generation
		// through the scheduler.
		LivenessPath: "/health_generate",
		MeasureProfile: func(ctx context.Context, client *http.Client, baseURL string, p catalog.Profile) (catalog.Profile, bool) {
			var info struct {
				MaxTotalNumTokens int `json:"max_total_num_tokens"`
				PageSize          int `json:"page_size"`
				ContextLength     int `json:"context_length"`
			}
			if getJSON(ctx, client, baseURL+"/server_info", &info) != nil || info.MaxTotalNumTokens <= 0 {
				return p, false
			}
			if info.PageSize > 0 {
				p.BlockSize = info.PageSize
			}
			if p.BlockSize <= 0 {
				return p, false
			}
			p.GPUBlocks = info.MaxTotalNumTokens / p.BlockSize
			if info.ContextLength > 0 {
				p.MaxModelLen = info.ContextLength
			}
			return p, true
		},
		// /server_info carries "version" among the server's settings.
		ReadVersion: func(ctx context.Context, client *http.Client, baseURL string) (string, bool) {
			var info struct {
				Version string `json:"version"`
			}
			if getJSON(ctx, client, baseURL+"/server_info", &info) != nil || info.Version == "" {
				return "", false
			}
			return info.Version, true
		},
		Stats: sglangStats,
		Releases: []EngineRelease{
			// v0.5.23 publishes its KV events as maps tagged "type"
			// (sglang#37482); v0.5.19 as positional arrays.
			{Version: "0.5.23", Images: releaseImages(sglangImageRepo, "0.5.23"), EventFormat: kvevents.FormatSGLangMap},
			{Version: "0.5.19", Images: releaseImages(sglangImageRepo, "0.5.19"), EventFormat: kvevents.FormatSGLang},
		},
		ImageHTTPPort:  30000,
		PinsHostMemory: true,
		MemoryFlag:     "--mem-fraction-static",
		MemoryFraction: func(e catalog.EnginePlan) float64 { return e.MemFractionStatic },
		MemoryShare:    catalog.ShareOfFreeStatic,
		// v0.5.19's --kv-cache-dtype choices are auto, fp8_e5m2, fp8_e4m3,
		// bf16, bfloat16 and fp4_e2m1: no bare "fp8".
		KVCacheDtypeNames: map[string]string{catalog.KVCacheFP8: "fp8_e4m3"},
		KVEvents:          true,
		// HostKVCache refuses a host pool larger than MemAvailable less
		// HICACHE_HOST_MEMORY_RESERVE_BYTES, 10 GiB, in each process
		// (python/sglang/srt/mem_cache/pool_host/base.py at
		// 712c06178f7f56e9f8d10b011ff4312f1270f8cf, untagged; the check
		// was read there, not at v0.5.23).
		HostTierKeepFree: SGLangHostKeepFree,
		// HiCache's "file" storage backend sits below its host tier and
		// needs one.
		FileTier:     func(spec Spec) bool { return sglangHostGB(spec) > 0 },
		ForeignPages: true,
		// --enable-priority-scheduling orders the waiting queue by
		// priority, higher values first (schedule_low_priority_values_first
		// is off by default); a request without one then goes last, so
		// the gateway sends every request's.
		Priority:         &EnginePriority{Flags: []string{"--enable-priority-scheduling"}},
		SleepMode:        sglangSleep,
		ToolParsers:      sglangToolParsers,
		ReasoningParsers: qwen3Reasoning,
	})
}

// sglangImageRepo is the repository of SGLang's images.
const sglangImageRepo = "lmsysorg/sglang"

// sglangToolParsers are SGLang's tool-call parsers by model family.
var sglangToolParsers = map[Family]string{FamilyQwen3Coder: "qwen3_coder", FamilyQwen3Next: "qwen3_coder", FamilyQwen3: "qwen25"}

// sglangArgs are the arguments after `python3 -m sglang.launch_server`.
// SGLang's publisher defaults to none, so it is named; page size 16 gives one
// KV event per block the router hashes.
func sglangArgs(spec Spec, p Ports) []string {
	args := []string{"--model-path", modelPath(spec),
		"--served-model-name", spec.Model,
		"--host", p.Host, "--port", strconv.Itoa(p.HTTP),
		"--page-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		"--kv-events-config", kvEventsConfig(map[string]any{"publisher": "zmq"}, p),
		"--enable-metrics",
	}
	k := KindSGLang.Descriptor()
	args = append(args, k.Priority.Flags...)
	tool, reasoning := k.Parsers(spec)
	if tool != "" {
		args = append(args, "--tool-call-parser", tool)
	}
	if reasoning != "" {
		args = append(args, "--reasoning-parser", reasoning)
	}
	if tp := len(spec.GPUs()); tp > 1 {
		args = append(args, "--tp-size", strconv.Itoa(tp))
	}
	if spec.GPUMemoryUtilization > 0 {
		args = append(args, k.MemoryFlag, formatFloat(spec.GPUMemoryUtilization))
	}
	if spec.MaxModelLen > 0 {
		args = append(args, "--context-length", strconv.Itoa(spec.MaxModelLen))
	}
	if spec.KVCacheDtype != "" {
		args = append(args, "--kv-cache-dtype", k.KVCacheDtypeFlag(spec.KVCacheDtype))
	}
	if spec.ModelOverrides != "" {
		args = append(args, "--json-model-override-args", spec.ModelOverrides)
	}
	if gb := sglangHostGB(spec); gb > 0 {
		args = append(args, "--enable-hierarchical-cache", "--hicache-size", strconv.Itoa(gb),
			"--hicache-write-policy", "write_through")
	}
	if spec.UsesKVStore() {
		// The file backend writes each page the host tier takes (write
		// through) as a file in SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR
		// (Env). A prefetch from it waits for the whole hit up to a
		// timeout that grows with its length, then runs with what came:
		// a local SSD answers well within it, and a stalled disk delays a
		// request by seconds, not for ever.
		args = append(args, "--hicache-storage-backend", "file",
			"--hicache-storage-prefetch-policy", "timeout")
	}
	return append(args, spec.ExtraArgs...)
}

// sglangHostGB is --hicache-size for spec: SGLang reads it in decimal GB
// (1e9 bytes) for each tensor-parallel rank, each rank's process
// allocating that much pinned host memory (server_args.py; its
// HiCache host pool), so the engine's planned host tier, in GiB for the
// whole engine, is converted and divided by the ranks. It is an argparse
// int, which refuses a fraction at start, so it is floored; under 1 GB a
// rank gets no host tier: a size of 0 would make SGLang size it by
// --hicache-ratio instead, twice the GPU pool.
func sglangHostGB(spec Spec) int {
	return int(math.Floor(spec.KVOffloadingGiB * (1 << 30) / 1e9 / float64(len(spec.GPUs()))))
}

// sglangStats reads SGLang's metric names.
func sglangStats(families map[string]*dto.MetricFamily) (Stats, bool) {
	if families["sglang:num_running_reqs"] == nil {
		return Stats{}, false
	}
	v := func(name string) float64 { return sum(families[name]) }
	cached := families["sglang:cached_tokens_total"]
	return Stats{
		Running: int(v("sglang:num_running_reqs")), Waiting: int(v("sglang:num_queue_reqs")),
		KVUsage:          v("sglang:token_usage"),
		PrefixQueries:    int64(v("sglang:prompt_tokens_total")),
		PrefixHits:       int64(hitsFrom(cached, isDevice)),
		GenerationTokens: int64(v("sglang:generation_tokens_total")),
		RAMHitTokens:     int64(hitsFrom(cached, func(s string) bool { return s == "host" })),
		StoreHitTokens:   int64(hitsFrom(cached, func(s string) bool { return strings.HasPrefix(s, "storage") })),
	}, true
}
