package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var testPorts = Ports{Host: "127.0.0.1", HTTP: 8100, KVEvents: 5557, Replay: 5558}

// TestEngineArgs holds the command lines Hearth gives each engine to the
// flags those engines document: KV events on (SGLang's publisher named),
// block or page size 16, the parsers of the model's family, the planned
// memory, context and host tier.
func TestEngineArgs(t *testing.T) {
	const yarn = `{"max_position_embeddings":131072,"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768}}`
	spec := Spec{
		Name: "gpu0", Engine: KindVLLM, Model: "qwen3-14b-fp8", ModelPath: "Qwen/Qwen3-14B-FP8",
		MaxModelLen: 32768, GPUMemoryUtilization: 0.9, KVOffloadingGiB: 32,
	}
	cases := []struct {
		name string
		spec func(Spec) Spec
		want string
	}{
		{"vllm", func(s Spec) Spec { return s },
			`vllm serve Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --block-size 16 ` +
				`--kv-events-config {"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} ` +
				`--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 --gpu-memory-utilization 0.9 --max-model-len 32768 ` +
				`--scheduling-policy priority --kv-offloading-size 32 --kv-offloading-backend native`},
		// The plan's step budget reaches vLLM, whose own default would be
		// 2,048 on a 4090, and the simulated engine; SGLang's pool is
		// planned without the activations and is not told it.
		{"vllm, step budget", func(s Spec) Spec { s.MaxBatchedTokens = 4096; return s },
			`vllm serve Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --block-size 16 ` +
				`--kv-events-config {"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} ` +
				`--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 --gpu-memory-utilization 0.9 --max-model-len 32768 ` +
				`--max-num-batched-tokens 4096 --scheduling-policy priority --kv-offloading-size 32 --kv-offloading-backend native`},
		{"sim, step budget", func(s Spec) Spec {
			s.Simulated, s.Model, s.MaxBatchedTokens, s.KVOffloadingGiB = true, "qwen3-8b", 4096, 0
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--model qwen3-8b --block-size 16 --seed 0 --gpu-memory-utilization 0.9 --max-model-len 32768 --max-num-batched-tokens 4096`},
		{"sglang, step budget", func(s Spec) Spec { s.Engine, s.MaxBatchedTokens = KindSGLang, 4096; return s },
			`python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --page-size 16 ` +
				`--kv-events-config {"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} --enable-metrics ` +
				`--enable-priority-scheduling --tool-call-parser qwen25 --reasoning-parser qwen3 --mem-fraction-static 0.9 --context-length 32768 ` +
				`--enable-hierarchical-cache --hicache-size 34 --hicache-write-policy write_through`},
		{"vllm, qwen3-coder", func(s Spec) Spec {
			s.Model, s.ModelPath, s.MaxModelLen, s.KVOffloadingGiB, s.GPUMemoryUtilization = "Qwen/Qwen3-Coder-30B-A3B-Instruct", "", 0, 0, 0
			return s
		},
			`vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --served-model-name Qwen/Qwen3-Coder-30B-A3B-Instruct --host 127.0.0.1 --port 8100 --block-size 16 ` +
				`--kv-events-config {"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} ` +
				`--enable-auto-tool-choice --tool-call-parser qwen3_xml --scheduling-policy priority`},
		{"sglang", func(s Spec) Spec { s.Engine = KindSGLang; return s },
			`python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --page-size 16 ` +
				`--kv-events-config {"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} --enable-metrics ` +
				`--enable-priority-scheduling --tool-call-parser qwen25 --reasoning-parser qwen3 --mem-fraction-static 0.9 --context-length 32768 ` +
				`--enable-hierarchical-cache --hicache-size 34 --hicache-write-policy write_through`},
		{"sim", func(s Spec) Spec {
			s.Simulated, s.Model, s.GPU.Kind, s.Speedup, s.Seed = true, "qwen3-8b", "rtx3090", 20, 7
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--model qwen3-8b --block-size 16 --seed 7 --gpu rtx3090 --speedup 20 --gpu-memory-utilization 0.9 --max-model-len 32768 --kv-offloading-size 32`},
		{"sim playing sglang", func(s Spec) Spec {
			s.Simulated, s.Engine, s.Model, s.MaxModelLen, s.KVOffloadingGiB, s.GPUMemoryUtilization = true, KindSGLang, "qwen3-8b", 0, 0, 0
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--flavor sglang --model qwen3-8b --block-size 16 --seed 0`},
		{"sim, tool use", func(s Spec) Spec {
			s.Simulated, s.Model, s.MaxModelLen, s.KVOffloadingGiB, s.GPUMemoryUtilization = true, "qwen3-8b", 0, 0, 0
			s.AllowWriteTools, s.MinToolCalls, s.MaxToolCalls = true, 2, 4
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--model qwen3-8b --block-size 16 --seed 0 --tool-calls 2-4 --allow-write-tools`},
		{"vllm, tp 2, fp8 KV, yarn", func(s Spec) Spec {
			s.TensorParallel, s.KVCacheDtype, s.ModelOverrides, s.KVOffloadingGiB = []GPU{{Index: 1}}, "fp8", yarn, 0
			return s
		},
			`vllm serve Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --block-size 16 ` +
				`--kv-events-config {"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} ` +
				`--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 --tensor-parallel-size 2 --gpu-memory-utilization 0.9 --max-model-len 32768 ` +
				`--kv-cache-dtype fp8 --hf-overrides ` + yarn + ` --scheduling-policy priority`},
		{"sglang, tp 2, fp8 KV, yarn", func(s Spec) Spec {
			s.Engine, s.TensorParallel, s.KVCacheDtype, s.ModelOverrides, s.KVOffloadingGiB = KindSGLang, []GPU{{Index: 1}}, "fp8", yarn, 0
			return s
		},
			`python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8 --served-model-name qwen3-14b-fp8 --host 127.0.0.1 --port 8100 --page-size 16 ` +
				`--kv-events-config {"endpoint":"tcp://*:5557","publisher":"zmq","replay_endpoint":"tcp://*:5558","topic":"kv-events"} --enable-metrics ` +
				`--enable-priority-scheduling --tool-call-parser qwen25 --reasoning-parser qwen3 --tp-size 2 --mem-fraction-static 0.9 --context-length 32768 ` +
				`--kv-cache-dtype fp8_e4m3 --json-model-override-args ` + yarn},
		{"sim, tp 2, fp8 KV, yarn", func(s Spec) Spec {
			s.Simulated, s.Engine, s.TensorParallel, s.KVCacheDtype, s.ModelOverrides, s.KVOffloadingGiB = true, KindSGLang, []GPU{{Index: 1}}, "fp8", yarn, 0
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--flavor sglang --model qwen3-14b-fp8 --block-size 16 --seed 0 --gpu-memory-utilization 0.9 --max-model-len 32768 ` +
				`--tensor-parallel-size 2 --kv-cache-dtype fp8_e4m3 --hf-overrides ` + yarn},
		{"sim, no tool calls", func(s Spec) Spec {
			s.Simulated, s.Model, s.MaxModelLen, s.KVOffloadingGiB, s.GPUMemoryUtilization = true, "qwen3-8b", 0, 0, 0
			s.MaxToolCalls = -1
			return s
		},
			`/usr/bin/hearth sim-engine --listen 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 --kv-replay tcp://127.0.0.1:5558 --kv-events-topic kv-events ` +
				`--model qwen3-8b --block-size 16 --seed 0 --tool-calls 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(EngineArgs(tc.spec(spec), testPorts, "/usr/bin/hearth"), " ")
			if got != tc.want {
				t.Errorf("command line\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestKVEventsConfigIsJSON: the flag's value is one argument of valid JSON
// whatever the ports.
func TestKVEventsConfigIsJSON(t *testing.T) {
	args := KindVLLM.Descriptor().Args(Spec{Name: "g", Engine: KindVLLM, Model: "m"}, testPorts)
	i := slices.Index(args, "--kv-events-config")
	var cfg map[string]any
	if i < 0 || json.Unmarshal([]byte(args[i+1]), &cfg) != nil || cfg["enable_kv_cache_events"] != true {
		t.Fatalf("--kv-events-config %q", args[i+1])
	}
}

// TestTierFlags holds each engine's KV-tier flags, and the environment that
// goes with them, to what its pinned release takes: none, the host-RAM tier
// alone, and the RAM tier with the node's SSD store below it. vLLM v0.20.0
// has no file tier, so the store changes nothing there; SGLang's file
// backend needs its host tier and takes its directory from the environment.
func TestTierFlags(t *testing.T) {
	const store = "/var/lib/hearth/kvstore"
	cases := []struct {
		engine   Kind
		sim      bool // Spec.Simulated
		ramGiB   float64
		storeDir string
		want     []string // the flags after the engine's fixed ones
		env      []string
		uses     bool // UsesKVStore
	}{
		{KindVLLM, false, 0, "", nil, nil, false},
		{KindVLLM, false, 24, "", []string{"--kv-offloading-size", "24", "--kv-offloading-backend", "native"}, nil, false},
		{KindVLLM, false, 24, store, []string{"--kv-offloading-size", "24", "--kv-offloading-backend", "native"}, nil, false},
		{KindVLLM, false, 0, store, nil, nil, false},
		{KindSGLang, false, 0, "", nil, nil, false},
		// --hicache-size is decimal GB: 24 GiB are 25.8 GB.
		{KindSGLang, false, 24, "", []string{"--enable-hierarchical-cache", "--hicache-size", "25",
			"--hicache-write-policy", "write_through"}, nil, false},
		{KindSGLang, false, 24, store, []string{"--enable-hierarchical-cache", "--hicache-size", "25",
			"--hicache-write-policy", "write_through",
			"--hicache-storage-backend", "file", "--hicache-storage-prefetch-policy", "timeout"},
			[]string{"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR=" + store}, true},
		// No host tier to stage through: no store either.
		{KindSGLang, false, 0, store, nil, nil, false},
		// SGLang's --hicache-size is an argparse int (server_args.py): a
		// fraction would stop it at start, so the size is floored ...
		{KindSGLang, false, 12.5, "", []string{"--enable-hierarchical-cache", "--hicache-size", "13",
			"--hicache-write-policy", "write_through"}, nil, false},
		// ... and under 1 GiB there is no host tier (0 would be "use the
		// ratio", twice the GPU pool), so no store either.
		{KindSGLang, false, 0.5, store, nil, nil, false},
		{KindVLLM, true, 0, "", nil, nil, false},
		{KindVLLM, true, 24, "", []string{"--kv-offloading-size", "24"}, nil, false},
		{KindVLLM, true, 24, store, []string{"--kv-offloading-size", "24", "--kv-store-dir", store, "--kv-store-writer", "gpu0"}, nil, true},
		{KindVLLM, true, 0, store, []string{"--kv-store-dir", store, "--kv-store-writer", "gpu0"}, nil, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s sim=%v ram=%g store=%q", tc.engine, tc.sim, tc.ramGiB, tc.storeDir), func(t *testing.T) {
			// A model of no known family and no memory settings: the tier
			// flags are the last ones the engine gets.
			base := Spec{Name: "gpu0", Engine: tc.engine, Simulated: tc.sim, Model: "m"}
			spec := base
			spec.KVOffloadingGiB, spec.KVStoreDir = tc.ramGiB, tc.storeDir
			if err := spec.Validate(); err != nil {
				t.Fatal(err)
			}
			fixed := EngineArgs(base, testPorts, "hearth")
			got := EngineArgs(spec, testPorts, "hearth")
			if !slices.Equal(got[:len(fixed)], fixed) || !slices.Equal(got[len(fixed):], tc.want) {
				t.Errorf("command line\n got %q\nwant %q then %q", got, fixed, tc.want)
			}
			if env := EngineEnv(spec); !slices.Equal(env, tc.env) {
				t.Errorf("environment %q, want %q", env, tc.env)
			}
			if uses := spec.UsesKVStore(); uses != tc.uses {
				t.Errorf("UsesKVStore() = %v, want %v", uses, tc.uses)
			}
		})
	}
}

func TestValidateKVStoreDir(t *testing.T) {
	cases := []struct {
		dir string
		ok  bool
	}{
		{"", true},
		{"/var/lib/hearth/kvstore", true},
		{"kvstore", false},
		{"./kvstore", false},
		{"/mnt/a:b", false},
		{"/mnt/a,b", false},
	}
	for _, tc := range cases {
		err := Spec{Name: "gpu0", Engine: KindSGLang, Model: "m", KVStoreDir: tc.dir}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate with KVStoreDir %q: %v", tc.dir, err)
		}
	}
}

// TestToolParsersByExactFamily: Qwen3.5 and Qwen3-Next write XML tool
// calls, as Qwen3-Coder does, and must not get the JSON parser the other
// Qwen3 models get by their "qwen3" substring; they think as Qwen3 does.
func TestToolParsersByExactFamily(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model                   string
		vllm, sglang, reasoning string
	}{
		{"Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_xml", "qwen3_coder", ""},
		{"Qwen/Qwen3.5-27B", "qwen3_xml", "qwen3_coder", "qwen3"},
		{"Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3_xml", "qwen3_coder", "qwen3"},
		{"Qwen/Qwen3-8B", "hermes", "qwen25", "qwen3"},
		{"meta-llama/Llama-3.1-8B-Instruct", "", "", ""},
	} {
		f := FamilyOf(tc.model)
		if got := vllmToolParsers[f]; got != tc.vllm {
			t.Errorf("%s: vLLM tool parser %q, want %q", tc.model, got, tc.vllm)
		}
		if got := sglangToolParsers[f]; got != tc.sglang {
			t.Errorf("%s: SGLang tool parser %q, want %q", tc.model, got, tc.sglang)
		}
		if got := qwen3Reasoning[f]; got != tc.reasoning {
			t.Errorf("%s: reasoning parser %q, want %q", tc.model, got, tc.reasoning)
		}
	}
}

// TestHiCacheSizePerRank: SGLang allocates --hicache-size, in decimal GB,
// in each tensor-parallel rank's process (server_args.py), so the engine's
// planned host tier is converted from GiB and shared out between the
// ranks, floored to SGLang's int; a share under 1 GB is no host tier.
func TestHiCacheSizePerRank(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gib  float64
		tp   int
		want int
	}{
		{24, 1, 25}, {24, 2, 12}, {24, 4, 6}, {64, 8, 8}, {1.5, 2, 0}, {0.9, 1, 0},
	} {
		spec := Spec{Engine: KindSGLang, KVOffloadingGiB: tc.gib}
		for range tc.tp - 1 {
			spec.TensorParallel = append(spec.TensorParallel, GPU{})
		}
		if got := sglangHostGB(spec); got != tc.want {
			t.Errorf("%v GiB over %d ranks: --hicache-size %d, want %d", tc.gib, tc.tp, got, tc.want)
		}
	}
}
