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

// Endpoints are the addresses a client of an engine of the kind started
// with these ports uses; the KV-event addresses are left empty for a kind
// that publishes no events (the router then predicts its cache).
func (p Ports) Endpoints(kind Kind) Endpoints {
	host := p.Host
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	ep := Endpoints{BaseURL: fmt.Sprintf("http://%s:%d", host, p.HTTP)}
	if k, ok := Lookup(kind); ok && k.KVEvents {
		ep.KVEvents = fmt.Sprintf("tcp://%s:%d", host, p.KVEvents)
		ep.KVReplay = fmt.Sprintf("tcp://%s:%d", host, p.Replay)
		ep.Topic = KVEventsTopic
	}
	return ep
}

// Family is a family of models whose tool calls and reasoning the engines
// parse alike; "" for a model Hearth knows no parsers for.
type Family string

// The model families Hearth names parsers for.
const (
	FamilyQwen3Coder Family = "qwen3-coder" // tool calls as XML
	// FamilyQwen3Next is Qwen3.5 and Qwen3-Next: tool calls as XML, as
	// the Coder writes them, and thinking in <think> tags as Qwen3 does.
	FamilyQwen3Next Family = "qwen3-next"
	FamilyQwen3     Family = "qwen3" // tool calls as JSON in <tool_call> tags
)

// FamilyOf picks a model's family from its name.
func FamilyOf(model string) Family {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "qwen3-coder"):
		return FamilyQwen3Coder
	case strings.Contains(m, "qwen3.5"), strings.Contains(m, "qwen3_5"), strings.Contains(m, "qwen3-next"):
		// Matched before "qwen3": their XML tool calls would come back
		// as empty tool_calls through the JSON parser.
		return FamilyQwen3Next
	case strings.Contains(m, "qwen3"):
		return FamilyQwen3
	}
	return ""
}

// qwen3Reasoning is both engines' reasoning parser: the Qwen3 models but
// the Coder think in <think> tags.
var qwen3Reasoning = map[Family]string{FamilyQwen3: "qwen3", FamilyQwen3Next: "qwen3"}

// EngineArgs returns the command line of the engine a spec names, program
// and all, as a native install runs it (`vllm serve …`, `python3 -m
// sglang.launch_server …`), or for a simulated spec `hearth sim-engine …`
// with hearth the binary's path. The Docker runtime passes the kind's
// ImageCommand to the engines' images instead.
func EngineArgs(spec Spec, p Ports, hearth string) []string {
	if spec.Simulated {
		return append([]string{hearth, "sim-engine"}, SimEngineArgs(spec, p)...)
	}
	return spec.Engine.Descriptor().CommandLine(spec, p)
}

// EngineEnv is the environment the engine needs for the spec beyond its
// command line, KEY=VALUE (the kind's Env). The launchers add it before
// Spec.Env, which may override it.
func EngineEnv(spec Spec) []string {
	if k, ok := Lookup(spec.Engine); ok && k.Env != nil && !spec.Simulated {
		return k.Env(spec)
	}
	return nil
}

// SimEngineArgs are the arguments after `hearth sim-engine`.
func SimEngineArgs(spec Spec, p Ports) []string {
	ep := p.Endpoints(spec.Engine)
	args := []string{"--listen", fmt.Sprintf("%s:%d", p.Host, p.HTTP)}
	if ep.KVEvents != "" {
		args = append(args, "--kv-events", ep.KVEvents, "--kv-replay", ep.KVReplay, "--kv-events-topic", ep.Topic)
	}
	if spec.Engine != KindVLLM { // the simulator's default
		args = append(args, "--flavor", string(spec.Engine))
	}
	args = append(args,
		"--model", spec.Model,
		"--block-size", strconv.Itoa(tokenizer.DefaultBlockSize),
		"--seed", strconv.FormatInt(spec.Seed, 10),
	)
	if spec.GPU.Kind != "" {
		args = append(args, "--gpu", spec.GPU.Kind)
	}
	if spec.EngineVersion != "" {
		args = append(args, "--engine-version", spec.EngineVersion)
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
	if spec.MaxBatchedTokens > 0 {
		args = append(args, "--max-num-batched-tokens", strconv.Itoa(spec.MaxBatchedTokens))
	}
	if tp := len(spec.GPUs()); tp > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(tp))
	}
	if spec.KVCacheDtype != "" {
		args = append(args, "--kv-cache-dtype", spec.Engine.Descriptor().KVCacheDtypeFlag(spec.KVCacheDtype))
	}
	if spec.ModelOverrides != "" {
		args = append(args, "--hf-overrides", spec.ModelOverrides)
	}
	if spec.KVOffloadingGiB > 0 {
		args = append(args, "--kv-offloading-size", formatFloat(spec.KVOffloadingGiB))
	}
	if spec.UsesKVStore() {
		args = append(args, "--kv-store-dir", spec.KVStoreDir, "--kv-store-writer", spec.Name)
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
