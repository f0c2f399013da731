package runtime

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/tokenizer"
)

// KVEventsTopic is the topic frame every engine Hearth starts publishes its
// KV events under.
const KVEventsTopic = "kv-events"

// FreePorts asks the kernel for three free ports on host. Another process
// could take one before the engine binds it; the engine then fails to start
// and is started again on new ports.
func FreePorts(host string) (Ports, error) {
	var ports [3]int
	for i := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return Ports{}, fmt.Errorf("free port: %w", err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return Ports{Host: host, HTTP: ports[0], KVEvents: ports[1], Replay: ports[2]}, nil
}

// Ports are where an engine is told to serve. Host is the address the
// engine binds its HTTP API to.
type Ports struct {
	Host                   string
	HTTP, KVEvents, Replay int
}

// Endpoints are the addresses a client of an engine started with these
// ports uses.
func (p Ports) Endpoints() Endpoints {
	host := p.Host
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return Endpoints{
		BaseURL:  fmt.Sprintf("http://%s:%d", host, p.HTTP),
		KVEvents: fmt.Sprintf("tcp://%s:%d", host, p.KVEvents),
		KVReplay: fmt.Sprintf("tcp://%s:%d", host, p.Replay),
		Topic:    KVEventsTopic,
	}
}

// modelFamily is what the engines' tool-call and reasoning parsers need to
// know of a model.
type modelFamily struct {
	vllmToolParser, sglangToolParser, reasoningParser string
}

// familyOf picks the parsers for a model from its name: Qwen3-Coder writes
// its tool calls as XML, the other Qwen3 models as JSON in <tool_call> tags.
func familyOf(model string) (modelFamily, bool) {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "qwen3-coder"):
		return modelFamily{vllmToolParser: "qwen3_xml", sglangToolParser: "qwen3_coder"}, true
	case strings.Contains(m, "qwen3"):
		return modelFamily{vllmToolParser: "hermes", sglangToolParser: "qwen25", reasoningParser: "qwen3"}, true
	}
	return modelFamily{}, false
}

// EngineArgs returns the command line of the engine a spec names, program
// and all, as a native install runs it: `vllm serve …`, `python3 -m
// sglang.launch_server …`, or `hearth sim-engine …` (with hearth the path
// given). The Docker runtime passes the same arguments to the engines'
// images, whose entrypoints supply the program.
func EngineArgs(spec Spec, p Ports, hearth string) []string {
	switch spec.Engine {
	case KindVLLM:
		return append([]string{"vllm", "serve"}, VLLMArgs(spec, p)...)
	case KindSGLang:
		return append([]string{"python3", "-m", "sglang.launch_server"}, SGLangArgs(spec, p)...)
	default:
		return append([]string{hearth, "sim-engine"}, SimEngineArgs(spec, p)...)
	}
}

// VLLMArgs are the arguments after `vllm serve`: the model first, then KV
// events on (with a replay socket), block size 16, tool-call and reasoning
// parsers for the model's family, and the planned memory and context.
func VLLMArgs(spec Spec, p Ports) []string {
	args := []string{modelPath(spec),
		"--served-model-name", spec.Model,
		"--host", p.Host, "--port", strconv.Itoa(p.HTTP),
		"--block-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		// vLLM binds its publisher only to an address with a wildcard;
		// with a host name it would connect instead.
		"--kv-events-config", kvEventsConfig(map[string]any{"enable_kv_cache_events": true}, p),
	}
	if f, ok := familyOf(spec.Model + " " + spec.ModelPath); ok {
		args = append(args, "--enable-auto-tool-choice", "--tool-call-parser", f.vllmToolParser)
		if f.reasoningParser != "" {
			args = append(args, "--reasoning-parser", f.reasoningParser)
		}
	}
	if tp := len(spec.GPUs()); tp > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(tp))
	}
	if spec.GPUMemoryUtilization > 0 {
		args = append(args, "--gpu-memory-utilization", formatFloat(spec.GPUMemoryUtilization))
	}
	if spec.MaxModelLen > 0 {
		args = append(args, "--max-model-len", strconv.Itoa(spec.MaxModelLen))
	}
	if spec.KVOffloadingGiB > 0 {
		// The OffloadingConnector's CPU tier. v0.20.0 has no tier below it
		// (no file-system secondary tier, no self-describing CPU events:
		// docs/engine-tiers.md), so KVStoreDir gives vLLM nothing.
		args = append(args, "--kv-offloading-size", formatFloat(spec.KVOffloadingGiB), "--kv-offloading-backend", "native")
	}
	return append(args, spec.ExtraArgs...)
}

// SGLangArgs are the arguments after `python3 -m sglang.launch_server`.
// SGLang's publisher defaults to none, so it is named; page size 16 gives one
// KV event per block the router hashes.
func SGLangArgs(spec Spec, p Ports) []string {
	args := []string{"--model-path", modelPath(spec),
		"--served-model-name", spec.Model,
		"--host", p.Host, "--port", strconv.Itoa(p.HTTP),
		"--page-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		"--kv-events-config", kvEventsConfig(map[string]any{"publisher": "zmq"}, p),
		"--enable-metrics",
	}
	if f, ok := familyOf(spec.Model + " " + spec.ModelPath); ok {
		args = append(args, "--tool-call-parser", f.sglangToolParser)
		if f.reasoningParser != "" {
			args = append(args, "--reasoning-parser", f.reasoningParser)
		}
	}
	if tp := len(spec.GPUs()); tp > 1 {
		args = append(args, "--tp-size", strconv.Itoa(tp))
	}
	if spec.GPUMemoryUtilization > 0 {
		args = append(args, "--mem-fraction-static", formatFloat(spec.GPUMemoryUtilization))
	}
	if spec.MaxModelLen > 0 {
		args = append(args, "--context-length", strconv.Itoa(spec.MaxModelLen))
	}
	if spec.KVOffloadingGiB > 0 {
		args = append(args, "--enable-hierarchical-cache", "--hicache-size", formatFloat(spec.KVOffloadingGiB),
			"--hicache-write-policy", "write_through")
	}
	if spec.UsesKVStore() {
		// The file backend writes each page the host tier takes (write
		// through) as a file in SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR
		// (EngineEnv). A prefetch from it waits for the whole hit up to a
		// timeout that grows with its length, then runs with what came:
		// a local SSD answers well within it, and a stalled disk delays a
		// request by seconds, not for ever.
		args = append(args, "--hicache-storage-backend", "file",
			"--hicache-storage-prefetch-policy", "timeout")
	}
	return append(args, spec.ExtraArgs...)
}

// EngineEnv is the environment the engine needs for the spec beyond its
// command line, KEY=VALUE: SGLang's file storage backend takes its
// directory only from SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR. The
// launchers add it before Spec.Env, which may override it.
func EngineEnv(spec Spec) []string {
	if spec.Engine == KindSGLang && spec.UsesKVStore() {
		return []string{SGLangFileStorageDirEnv + "=" + spec.KVStoreDir}
	}
	return nil
}

// SimEngineArgs are the arguments after `hearth sim-engine`.
func SimEngineArgs(spec Spec, p Ports) []string {
	ep := p.Endpoints()
	args := []string{
		"--listen", fmt.Sprintf("%s:%d", p.Host, p.HTTP),
		"--kv-events", ep.KVEvents, "--kv-replay", ep.KVReplay, "--kv-events-topic", ep.Topic,
		"--model", spec.Model,
		"--block-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		"--seed", strconv.FormatInt(spec.Seed, 10),
	}
	if spec.GPU.Kind != "" {
		args = append(args, "--gpu", spec.GPU.Kind)
	}
	if spec.Speedup > 0 {
		args = append(args, "--speedup", formatFloat(spec.Speedup))
	}
	if tc := ToolCallsFlag(spec); tc != "" {
		args = append(args, "--tool-calls", tc)
	}
	if spec.AllowWriteTools {
		args = append(args, "--allow-write-tools")
	}
	if spec.NumGPUBlocks > 0 {
		args = append(args, "--num-gpu-blocks", strconv.Itoa(spec.NumGPUBlocks))
	}
	if spec.GPUMemoryUtilization > 0 {
		args = append(args, "--gpu-memory-utilization", formatFloat(spec.GPUMemoryUtilization))
	}
	if spec.MaxModelLen > 0 {
		args = append(args, "--max-model-len", strconv.Itoa(spec.MaxModelLen))
	}
	if spec.KVOffloadingGiB > 0 {
		args = append(args, "--kv-offloading-size", formatFloat(spec.KVOffloadingGiB))
	}
	if spec.UsesKVStore() {
		args = append(args, "--kv-store-dir", spec.KVStoreDir)
	}
	return append(args, spec.ExtraArgs...)
}

// kvEventsConfig is the JSON of --kv-events-config: the publisher's socket
// on the wildcard address of the events port (the real engines bind only
// such an address), the replay socket likewise, and Hearth's topic.
func kvEventsConfig(base map[string]any, p Ports) string {
	cfg := map[string]any{
		"publisher":       "zmq",
		"endpoint":        fmt.Sprintf("tcp://*:%d", p.KVEvents),
		"replay_endpoint": fmt.Sprintf("tcp://*:%d", p.Replay),
		"topic":           KVEventsTopic,
	}
	for k, v := range base {
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg) // strings, ints and bools always marshal
	return string(b)
}

func modelPath(spec Spec) string {
	if spec.ModelPath != "" {
		return spec.ModelPath
	}
	return spec.Model
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ToolCallsFlag is a simulated engine's tool calls per task as its
// --tool-calls flag takes them ("N-M"), or "" for the default.
func ToolCallsFlag(spec Spec) string {
	switch {
	case spec.MaxToolCalls < 0:
		return "0"
	case spec.MinToolCalls == 0 && spec.MaxToolCalls == 0:
		return ""
	}
	return fmt.Sprintf("%d-%d", spec.MinToolCalls, spec.MaxToolCalls)
}

// SGLangFileStorageDirEnv is the variable from which SGLang's HiCache file
// backend takes its directory.
const SGLangFileStorageDirEnv = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"
