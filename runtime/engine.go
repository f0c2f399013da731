package runtime

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
)

// Kind names an inference engine implementation: "vllm", "sglang". Each
// kind is described once, by the EngineKind registered under its name (one
// file per kind, engine_<kind>.go); code that must treat kinds apart asks
// the descriptor, never compares names.
type Kind string

// The engine kinds Hearth registers itself.
const (
	KindVLLM   Kind = "vllm"
	KindSGLang Kind = "sglang"
)

// EngineKind is everything Hearth knows of one engine implementation that
// another does not share. Whether the engine is the real one or Hearth's
// simulator playing it is the runtime's business (Spec.Simulated), not the
// kind's.
type EngineKind struct {
	// Name is the kind's name on command lines, in the API and in specs.
	Name Kind

	// Program is what runs the engine in a native install, before Args:
	// {"vllm", "serve"}.
	Program []string
	// Args are the engine's arguments after Program for a spec, serving on
	// ports: model, ports, block size, KV events, parsers, memory, context
	// and tiers, then Spec.ExtraArgs.
	Args func(spec Spec, p Ports) []string
	// Env is the environment the engine needs beyond its command line,
	// KEY=VALUE; nil for none. The launchers add it before Spec.Env, which
	// may override it.
	Env func(spec Spec) []string
	// WSLEnv is the environment the engine needs on a WSL2 host, where the
	// Windows driver serves the GPU: KEY=VALUE, added to a real engine's
	// Spec.Env by the planner there; nil for none.
	WSLEnv []string

	// LivenessPath is what a serving engine is probed at, "/health".
	LivenessPath string
	// MeasureProfile asks a serving engine how much KV it holds: ok false
	// when it tells nothing, and the caller keeps its estimate.
	MeasureProfile func(ctx context.Context, client *http.Client, baseURL string, estimate catalog.Profile) (p catalog.Profile, ok bool)
	// ReadVersion asks a serving engine which release it is ("0.20.0");
	// ok false when it does not say. nil: the kind cannot be asked.
	ReadVersion func(ctx context.Context, client *http.Client, baseURL string) (version string, ok bool)
	// Stats reads load and cache figures from the engine's /metrics by its
	// own metric names; ok false when its names are absent.
	Stats func(families map[string]*dto.MetricFamily) (s Stats, ok bool)

	// Releases are the engine's releases whose facts Hearth knows, newest
	// (the pinned one) first: each where a fact on the wire changed, so
	// that an engine of an older release (an --image with its tag) is
	// spoken to as that release speaks (ReleaseFor).
	Releases []EngineRelease
	// Images are the pinned release's container images, newest CUDA
	// first: the Docker runtime runs the first whose MinCUDA the driver
	// meets, else the last. Register takes them from Releases[0] when the
	// kind lists releases.
	Images []Image
	// ImageEntrypoint says the images' entrypoint is Program, so that a
	// container is given Args alone (vLLM's); otherwise it is given the
	// whole command line.
	ImageEntrypoint bool
	// ImageHTTPPort is the HTTP port the engine serves on inside its
	// container (the image's EXPOSE).
	ImageHTTPPort int
	// PinsHostMemory says the engine pins host memory for its KV tiers and
	// needs an unlimited memlock in a container.
	PinsHostMemory bool

	// MemoryFlag is the flag that sizes the engine's share of GPU memory
	// ("--gpu-memory-utilization"; required), MemoryFraction the value of
	// it in a plan, and MemoryShare what that share covers, which decides
	// how large a KV cache it leaves (EngineConfigOf): engines count the
	// share differently.
	MemoryFlag     string
	MemoryFraction func(catalog.EnginePlan) float64
	MemoryShare    catalog.MemoryShare
	// KVCacheDtypeNames spell the catalog's KV cache dtypes (catalog.
	// KVCacheFP8, ...) as the engine's --kv-cache-dtype takes them, where
	// it differs; a dtype absent from it is passed as it is
	// (KVCacheDtypeFlag).
	KVCacheDtypeNames map[string]string

	// TokenizeChat says the engine's /tokenize takes chat messages and
	// renders them with its own template (vLLM's TokenizeChatRequest), so
	// the start-up self-check compares the template too; otherwise the
	// check sends the prompt Hearth rendered (SGLang's prompt form, which
	// every SGLang with /tokenize takes).
	TokenizeChat bool

	// KVEvents says whether the engine publishes KV events, and EventFormat
	// the pinned release's wire layout (Register takes it from
	// Releases[0]; an older release's is its EngineRelease's). A kind
	// without them is routed on predicted caches (its Endpoints carry no
	// KV-event addresses).
	KVEvents    bool
	EventFormat kvevents.Format

	// HostTierKeepFree is the host RAM, in bytes, the engine keeps free
	// when each of its processes allocates its share of the host-RAM KV
	// tier: it refuses to start when the share exceeds MemAvailable less
	// this. The planner keeps it free (catalog.PlanHostTiers); 0: none.
	HostTierKeepFree uint64

	// FileTier says whether the engine's pinned release puts the node's
	// SSD KV store (Spec.KVStoreDir) in a tier of its own for this spec;
	// nil: it has no such tier.
	FileTier func(spec Spec) bool
	// ForeignPages says the file tier writes pages in the engine's own
	// layout at the store's root (kvbm.ForeignSpace), shared by every
	// engine of the kind on the node, rather than in Hearth's spaces.
	ForeignPages bool

	// Priority says how the engine orders waiting requests by the
	// "priority" field of a request; nil when it cannot. Args turns it on.
	Priority *EnginePriority

	// SleepMode is how the engine releases its GPU memory and takes it
	// back without a restart (Sleep, Wake); nil when it cannot.
	SleepMode *EngineSleep

	// ToolParsers and ReasoningParsers name the engine's tool-call and
	// reasoning parsers by model family (FamilyOf); a family absent from
	// ToolParsers gets no tool parsing, from ReasoningParsers no reasoning
	// parser.
	ToolParsers, ReasoningParsers map[Family]string
}

// Parsers are the engine's tool-call and reasoning parsers for the spec's
// model ("" for none).
func (k *EngineKind) Parsers(spec Spec) (tool, reasoning string) {
	f := FamilyOf(spec.Model + " " + spec.ModelPath)
	return k.ToolParsers[f], k.ReasoningParsers[f]
}

// KVCacheDtypeFlag is the catalog's KV cache dtype as the engine's
// --kv-cache-dtype spells it.
func (k *EngineKind) KVCacheDtypeFlag(dtype string) string {
	if name, ok := k.KVCacheDtypeNames[strings.ToLower(dtype)]; ok {
		return name
	}
	return dtype
}

// EnginePriority is an engine's priority scheduling
// (docs/engine-conformance.md).
type EnginePriority struct {
	// Flags turn it on: {"--scheduling-policy", "priority"}.
	Flags []string
	// LowerFirst says lower values are served first (vLLM); otherwise
	// higher ones are (SGLang).
	LowerFirst bool
}

// Sign is how Hearth's priority, higher first, becomes the engine's: 1 as
// is, -1 negated; 0 for a kind without priority scheduling (p nil).
func (p *EnginePriority) Sign() int {
	switch {
	case p == nil:
		return 0
	case p.LowerFirst:
		return -1
	}
	return 1
}

// Image is one container image of an engine and the oldest CUDA version
// (NVML's encoding: 12090 for 12.9) a driver must run for it.
type Image struct {
	Ref     string
	MinCUDA int
}

// CommandLine is the engine's command line for a spec, program and all, as
// a native install runs it.
func (k *EngineKind) CommandLine(spec Spec, p Ports) []string {
	return append(slices.Clone(k.Program), k.Args(spec, p)...)
}

// ImageCommand is what a container of the engine's image is given as its
// command: Args alone when the image's entrypoint is Program.
func (k *EngineKind) ImageCommand(spec Spec, p Ports) []string {
	if k.ImageEntrypoint {
		return k.Args(spec, p)
	}
	return k.CommandLine(spec, p)
}

// Image is the image to run for a driver whose CUDA version NVML reports as
// cudaVersion (0 when unknown): the newest the driver runs, else the one
// that runs on most drivers. ok is false for a kind without images.
func (k *EngineKind) Image(cudaVersion int) (ref string, ok bool) {
	if len(k.Images) == 0 {
		return "", false
	}
	for _, img := range k.Images {
		if img.MinCUDA <= cudaVersion {
			return img.Ref, true
		}
	}
	return k.Images[len(k.Images)-1].Ref, true
}

// registry holds the registered kinds by name.
var registry = struct {
	sync.RWMutex
	kinds map[Kind]*EngineKind
}{kinds: map[Kind]*EngineKind{}}

// Register adds an engine kind. It panics when the name is empty, taken or
// not lower case, or a function every kind needs is missing: a kind is
// registered from an init function, where such a mistake is a bug.
func Register(k *EngineKind) {
	switch {
	case k.Name == "" || Kind(strings.ToLower(string(k.Name))) != k.Name:
		panic(fmt.Sprintf("runtime: engine kind name %q must be lower case and not empty", k.Name))
	case k.Args == nil || k.MeasureProfile == nil || k.Stats == nil || k.MemoryFraction == nil:
		panic(fmt.Sprintf("runtime: engine kind %s lacks Args, MeasureProfile, Stats or MemoryFraction", k.Name))
	case k.LivenessPath == "" || len(k.Program) == 0:
		panic(fmt.Sprintf("runtime: engine kind %s lacks a program or a liveness path", k.Name))
	case k.MemoryFlag == "":
		panic(fmt.Sprintf("runtime: engine kind %s lacks the flag that sizes its memory", k.Name))
	case len(k.Releases) > 0 && checkReleases(k) != nil:
		panic(fmt.Sprintf("runtime: engine kind %s: %v", k.Name, checkReleases(k)))
	case len(k.Releases) > 0 && len(k.Images) > 0:
		panic(fmt.Sprintf("runtime: engine kind %s lists releases: its images are the pinned release's", k.Name))
	case (len(k.Images) > 0 || len(k.Releases) > 0 && len(k.Releases[0].Images) > 0) && k.ImageHTTPPort <= 0:
		panic(fmt.Sprintf("runtime: engine kind %s has images but no port they serve on", k.Name))
	}
	if len(k.Releases) > 0 {
		k.Images, k.EventFormat = k.Releases[0].Images, k.Releases[0].EventFormat
	}
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.kinds[k.Name]; ok {
		panic(fmt.Sprintf("runtime: engine kind %s registered twice", k.Name))
	}
	registry.kinds[k.Name] = k
}

// Lookup returns the kind registered under name.
func Lookup(name Kind) (*EngineKind, bool) {
	registry.RLock()
	defer registry.RUnlock()
	k, ok := registry.kinds[name]
	return k, ok
}

// KindOf checks an engine kind named on a command line (in any case) and
// returns its descriptor.
func KindOf(name string) (*EngineKind, error) {
	if k, ok := Lookup(Kind(strings.ToLower(name))); ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown engine %q (known: %s)", name, KindNames())
}

// Kinds returns every registered kind, by name.
func Kinds() []*EngineKind {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]*EngineKind, 0, len(registry.kinds))
	for _, k := range registry.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *EngineKind) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// KindNames lists the registered kinds' names for messages: "sglang,
// vllm".
func KindNames() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, string(k.Name))
	}
	return strings.Join(names, ", ")
}

// Descriptor is the kind's registered descriptor. It panics for a kind
// never registered: a spec's kind is checked by Spec.Validate before any
// launcher asks.
func (k Kind) Descriptor() *EngineKind {
	d, ok := Lookup(k)
	if !ok {
		panic(fmt.Sprintf("runtime: engine kind %q is not registered", k))
	}
	return d
}
