package runtime

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The simulated images' settings that no real command line has a place
// for (the modelled GPU, its speed, the answers' seed, …) travel beside it
// in the environment: the Docker runtime writes them (SimSettings.Env) and
// the simulated engine reads them (ParseSimEnv).
const (
	EnvSimGPU           = "HEARTH_SIM_GPU"               // modelled GPU kind; default rtx4090
	EnvSimSpeedup       = "HEARTH_SIM_SPEEDUP"           // modelled GPU runs this many times real time; default 1
	EnvSimSeed          = "HEARTH_SIM_SEED"              // seed of the answers (and vLLM's block hashes); default 0
	EnvSimNumGPUBlocks  = "HEARTH_SIM_NUM_GPU_BLOCKS"    // KV cache blocks; default derived from GPU memory
	EnvSimToolCalls     = "HEARTH_SIM_TOOL_CALLS"        // tool calls per task, N or N-M; default 3-6
	EnvSimWriting       = "HEARTH_SIM_ALLOW_WRITE_TOOLS" // 1: the model may call tools that write
	EnvSimEngineVersion = "HEARTH_SIM_ENGINE_VERSION"    // engine release played (Spec.EngineVersion); default the pinned one
	EnvSimKVEvents      = "HEARTH_SIM_KV_EVENTS"         // a fault of the KV events (SimKVEventFaults); default none, events as the release publishes them
	// EnvSimMemAvailableGiB is the host memory available (MemAvailable)
	// the simulated engine sees, in GiB, which the simulated SGLang weighs
	// its HiCache host pool against; default the machine's own.
	EnvSimMemAvailableGiB = "HEARTH_SIM_MEM_AVAILABLE_GIB"
)

// The faults a simulated engine's KV events can play (EnvSimKVEvents), each
// a way an engine's events could stop naming blocks as Hearth predicts:
// what the start-up KV-event self-check (CheckKVEvents) is there to catch.
const (
	// SimKVEventsWrongHashSeed names each event's parent block by a hash
	// under another seed than the one of the blocks the engine stored, as
	// an engine whose processes hash with different seeds would: the
	// chain from one request's blocks to the next's does not link.
	SimKVEventsWrongHashSeed = "wrong-hash-seed"
	// SimKVEventsUnknownLayout publishes positional events with their
	// fields in an order no release uses.
	SimKVEventsUnknownLayout = "unknown-layout"
	// SimKVEventsNone publishes no events at all, on an endpoint that
	// accepts subscribers.
	SimKVEventsNone = "none"
)

// SimKVEventFaults are the values EnvSimKVEvents takes.
var SimKVEventFaults = []string{SimKVEventsWrongHashSeed, SimKVEventsUnknownLayout, SimKVEventsNone}

// SimSettings are a simulated engine's settings beyond the real command
// line; zero values are the defaults.
type SimSettings struct {
	GPU          string  // modelled GPU kind
	Speedup      float64 // 0: real time
	Seed         int64
	NumGPUBlocks int // 0: derived from GPU memory
	// ToolCalls are the tool calls per task as ToolCallsFlag writes them
	// ("N-M"); "" for the default.
	ToolCalls       string
	AllowWriteTools bool
	// EngineVersion is the engine release played; "" for the pinned one.
	EngineVersion string
	// KVEventFault is one of SimKVEventFaults; "" publishes the events as
	// the release does.
	KVEventFault string
	// MemAvailableGiB is the host memory available the engine sees; 0:
	// the machine's own.
	MemAvailableGiB float64
}

// SimSettingsOf are a spec's simulated settings.
func SimSettingsOf(spec Spec) SimSettings {
	return SimSettings{
		GPU: spec.GPU.Kind, Speedup: spec.Speedup, Seed: spec.Seed, NumGPUBlocks: spec.NumGPUBlocks,
		ToolCalls: ToolCallsFlag(spec), AllowWriteTools: spec.AllowWriteTools,
		EngineVersion: spec.EngineVersion,
	}
}

// Env is the settings as KEY=VALUE pairs, defaults left out (the GPU and
// the seed always written).
func (s SimSettings) Env() []string {
	env := []string{EnvSimGPU + "=" + s.GPU, EnvSimSeed + "=" + strconv.FormatInt(s.Seed, 10)}
	if s.Speedup > 0 {
		env = append(env, EnvSimSpeedup+"="+formatFloat(s.Speedup))
	}
	if s.NumGPUBlocks > 0 {
		env = append(env, EnvSimNumGPUBlocks+"="+strconv.Itoa(s.NumGPUBlocks))
	}
	if s.ToolCalls != "" {
		env = append(env, EnvSimToolCalls+"="+s.ToolCalls)
	}
	if s.AllowWriteTools {
		env = append(env, EnvSimWriting+"=1")
	}
	if s.EngineVersion != "" {
		env = append(env, EnvSimEngineVersion+"="+s.EngineVersion)
	}
	if s.KVEventFault != "" {
		env = append(env, EnvSimKVEvents+"="+s.KVEventFault)
	}
	if s.MemAvailableGiB > 0 {
		env = append(env, EnvSimMemAvailableGiB+"="+formatFloat(s.MemAvailableGiB))
	}
	return env
}

// ParseSimEnv reads the settings from the environment, with the GPU
// (rtx4090) and the speed-up (1) defaulted. ToolCalls is returned as
// written, for the simulator's parser.
func ParseSimEnv(getenv func(string) string) (SimSettings, error) {
	s := SimSettings{GPU: "rtx4090", Speedup: 1, ToolCalls: getenv(EnvSimToolCalls), EngineVersion: getenv(EnvSimEngineVersion)}
	if v := getenv(EnvSimKVEvents); v != "" {
		if !slices.Contains(SimKVEventFaults, v) {
			return s, fmt.Errorf("%s=%q: want one of %s", EnvSimKVEvents, v, strings.Join(SimKVEventFaults, ", "))
		}
		s.KVEventFault = v
	}
	if v := getenv(EnvSimGPU); v != "" {
		s.GPU = v
	}
	if v := getenv(EnvSimSpeedup); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return s, fmt.Errorf("%s=%q: want a positive number", EnvSimSpeedup, v)
		}
		s.Speedup = f
	}
	if v := getenv(EnvSimSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want an integer", EnvSimSeed, v)
		}
		s.Seed = n
	}
	if v := getenv(EnvSimWriting); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", EnvSimWriting, v)
		}
		s.AllowWriteTools = b
	}
	if v := getenv(EnvSimMemAvailableGiB); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return s, fmt.Errorf("%s=%q: want a positive number of GiB", EnvSimMemAvailableGiB, v)
		}
		s.MemAvailableGiB = f
	}
	if v := getenv(EnvSimNumGPUBlocks); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a number of blocks", EnvSimNumGPUBlocks, v)
		}
		s.NumGPUBlocks = n
	}
	return s, nil
}
