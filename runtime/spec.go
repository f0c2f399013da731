package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
)

// GPU is the device an engine runs on, as the launcher needs it.
type GPU struct {
	Index int    // CUDA device index on the node
	UUID  string // "GPU-…", empty for simulated GPUs
	Kind  string // Hearth's short name, "rtx4090"; the simulated engine models it
	Name  string // marketing name, "NVIDIA GeForce RTX 4090"
	Node  string // host the GPU is in
}

// ID names the GPU to CUDA_VISIBLE_DEVICES and to Docker's device request:
// its UUID when known (stable across reboots and PCI renumbering), else
// its index.
func (g GPU) ID() string {
	if g.UUID != "" {
		return g.UUID
	}
	return strconv.Itoa(g.Index)
}

// Spec describes one engine to start. It says what to run, never where its
// ports are: the launcher picks them and reports them as Endpoints.
type Spec struct {
	Name   string // unique among engines, e.g. "sim/gpu0"
	Engine Kind   // a registered kind
	// Simulated runs Hearth's simulated engine playing Engine, configured
	// from the spec's fields (in-process by runtime/sim, as `hearth
	// sim-engine` by runtime/process), rather than the engine itself. A
	// simulated image (the Docker runtime's) plays the real engine's
	// command line instead, and its spec is not Simulated.
	Simulated bool
	// Model is the served model name clients and the router use
	// ("qwen3-14b-fp8"); ModelPath is what the engine loads (a Hugging Face
	// repository id or a local path), Model when empty.
	Model     string
	ModelPath string
	GPU       GPU
	// TensorParallel are the further GPUs of an engine that splits the
	// model over several (tensor parallelism); empty: GPU alone.
	TensorParallel []GPU

	MaxModelLen          int     // 0: the engine's default
	GPUMemoryUtilization float64 // 0: the engine's default
	// MaxBatchedTokens is the token budget of one engine step, the one the
	// plan sized the activation peak for (catalog.Plan's): vLLM's and the
	// simulated engine's --max-num-batched-tokens. A real SGLang is not
	// told it: the plan sizes its --mem-fraction-static without the
	// activations, which SGLang keeps outside its fraction
	// (docs/engine-conformance.md). 0: the engine's default.
	MaxBatchedTokens int
	// KVCacheDtype is the KV cache's dtype as the catalog (and vLLM) names
	// it ("fp8"; a kind that spells it otherwise on its command line says
	// so, EngineKind.KVCacheDtypeFlag);
	// "": the engine's default, the model's dtype.
	KVCacheDtype string
	// ModelOverrides is a JSON object overriding the model's config.json
	// (vLLM's --hf-overrides, SGLang's --json-model-override-args): the
	// rope_scaling that gives a model its longer YaRN context
	// (catalog.Model.RopeScalingJSON); "": none.
	ModelOverrides string
	// KVOffloadingGiB is the engine's host-RAM KV tier (vLLM's
	// --kv-offloading-size, SGLang's --hicache-size); 0: none.
	KVOffloadingGiB float64
	// KVStoreDir is the node's SSD KV store as the engine sees it: one
	// directory on local disk that every engine of the node shares through
	// its own storage tier below the host-RAM tier; "" for none. It must be
	// an absolute path. Not every pinned engine release has such a tier
	// (UsesKVStore says which do; docs/engine-tiers.md why).
	KVStoreDir string
	// EngineVersion is the engine release the spec runs ("0.20.0"), read
	// from an --image tag (EngineKind.ImageVersion); "": the kind's pinned
	// release. It decides the release's wire facts (Release) and is passed
	// to a simulated engine, which plays that release.
	EngineVersion string

	// Simulated engines only: run the modelled GPU this many times faster
	// than real time, seed its answers, override its KV size (0: derive).
	Speedup      float64
	Seed         int64
	NumGPUBlocks int
	// Simulated engines only: the model's tool use. AllowWriteTools lets
	// it call tools that write or run commands; MinToolCalls and
	// MaxToolCalls bound its calls per task (both 0: the default, 3-6;
	// MaxToolCalls -1: none).
	AllowWriteTools            bool
	MinToolCalls, MaxToolCalls int

	// Command, when set, is run instead of the engine's own command line
	// (process runtime): a user's wrapper script, or a test's failing
	// stand-in. Hearth passes it the ports through the environment.
	Command []string
	// ExtraArgs are appended to the engine's own command line: flags
	// Hearth does not set itself ("--enable-expert-parallel").
	ExtraArgs []string
	Env       []string // extra KEY=VALUE pairs for the engine

	// Estimate is the profile assumed until the engine tells better (from
	// the catalog of GPUs and models).
	Estimate catalog.Profile
}

// GPUs are every GPU the engine runs on, GPU first.
func (s Spec) GPUs() []GPU { return append([]GPU{s.GPU}, s.TensorParallel...) }

// GPUIDs joins the IDs of the engine's GPUs with commas, as
// CUDA_VISIBLE_DEVICES lists them.
func (s Spec) GPUIDs() string {
	ids := make([]string, 0, 1+len(s.TensorParallel))
	for _, g := range s.GPUs() {
		ids = append(ids, g.ID())
	}
	return strings.Join(ids, ",")
}

// Validate reports what is wrong with the spec, if anything.
func (s Spec) Validate() error {
	switch {
	case s.Name == "":
		return errors.New("engine spec: name is empty")
	case !registered(s.Engine):
		return fmt.Errorf("engine spec %s: unknown engine %q (known: %s)", s.Name, s.Engine, KindNames())
	case s.Model == "":
		return fmt.Errorf("engine spec %s: model is empty", s.Name)
	case s.ModelOverrides != "" && !json.Valid([]byte(s.ModelOverrides)):
		return fmt.Errorf("engine spec %s: model overrides are not JSON: %s", s.Name, s.ModelOverrides)
	case s.Speedup < 0:
		return fmt.Errorf("engine spec %s: negative speedup", s.Name)
	case s.KVOffloadingGiB < 0:
		return fmt.Errorf("engine spec %s: negative KV offloading size", s.Name)
	case s.KVStoreDir != "" && !filepath.IsAbs(s.KVStoreDir):
		return fmt.Errorf("engine spec %s: KV store directory %q is not an absolute path", s.Name, s.KVStoreDir)
	case strings.ContainsAny(s.KVStoreDir, ":,"):
		// Docker's bind syntax splits on ':' and the engines' option
		// lists on ','; such a directory could not reach the engine whole.
		return fmt.Errorf("engine spec %s: KV store directory %q holds ':' or ','", s.Name, s.KVStoreDir)
	}
	return nil
}

// UsesKVStore reports whether the engine gets the node's SSD KV store:
// KVStoreDir is set and the engine has a tier to put it in: the simulated
// engine takes the directory as it is, a real one when its kind's pinned
// release has a file tier for the spec (EngineKind.FileTier).
func (s Spec) UsesKVStore() bool {
	if s.KVStoreDir == "" {
		return false
	}
	if s.Simulated {
		return true
	}
	k, ok := Lookup(s.Engine)
	return ok && k.FileTier != nil && k.FileTier(s)
}

func registered(k Kind) bool {
	_, ok := Lookup(k)
	return ok
}

// Endpoints are where a started engine serves.
type Endpoints struct {
	// BaseURL is the engine's HTTP root, e.g. "http://127.0.0.1:8100"; its
	// OpenAI API is under /v1.
	BaseURL string
	// KVEvents and KVReplay are the ZMQ endpoints of its KV-event publisher
	// and replay socket, e.g. "tcp://127.0.0.1:5557"; empty when it
	// publishes no events (the router then predicts its cache).
	KVEvents, KVReplay string
	Topic              string
}

// Launcher starts engines. Implementations: runtime/sim (in-process),
// runtime/process (child processes) and the Docker runtime.
type Launcher interface {
	// Name is the runtime's name as the API shows it: "sim", "process",
	// "docker".
	Name() string
	// Launch starts the engine and returns as soon as it runs (a process
	// spawned, a container started), long before it serves. On error
	// nothing is left running.
	Launch(ctx context.Context, spec Spec) (Handle, error)
}

// Handle is one started engine.
type Handle interface {
	Endpoints() Endpoints
	// Ready returns nil once the engine serves (its HTTP API answers with the
	// model listed), or an error when it exits first or ctx ends. Real
	// engines take minutes.
	Ready(ctx context.Context) error
	// Wait blocks until the engine has exited and says why.
	Wait() error
	// Stop asks the engine to stop and returns once it has exited; when ctx
	// ends first the engine is killed.
	Stop(ctx context.Context) error
	// Identity names what runs: a process ID or a container ID.
	Identity() Identity
	// Logs returns the engine's last output lines, oldest first.
	Logs() []string
}

// Detacher is a Handle that can let go of its engine and leave it running
// (a container), for a later daemon to adopt.
type Detacher interface {
	// Detach stops following the engine without stopping it; Wait then
	// returns.
	Detach()
}

// Identity names the operating-system object an engine runs as.
type Identity struct {
	PID       int    // process runtime
	Container string // docker runtime
	Image     string // docker runtime: the image it runs
}

// Release is the engine release whose facts hold for the spec (its
// EngineVersion's, the pinned one's when empty); known is false when the
// version is newer than any Hearth lists, or unreadable, and the pinned
// release's facts stand in (the caller logs it). A kind that lists no
// releases has the zero release with its own EventFormat.
func (s Spec) Release() (r EngineRelease, known bool) {
	k := s.Engine.Descriptor()
	if len(k.Releases) == 0 {
		return EngineRelease{EventFormat: k.EventFormat}, true
	}
	return k.ReleaseFor(s.EngineVersion)
}
