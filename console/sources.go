package console

import (
	"context"
	"errors"
	"time"

	"github.com/hearth-llm/hearth/apikey"
)

// The console reads the rest of Hearth only through the interfaces below.
// Their types are shaped for display, not for the subsystems that fill them:
// the daemon writes small adapters (router.Decision → Decision, sim.Stats and
// nodes.GPU → Engine, ...) so that this package imports none of them.
//
// Every method may be called from the hub's goroutine and from handlers,
// a few times a second at most. What a method returns belongs to the
// console, which keeps it for a while: return copies, not slices that the
// source goes on changing.

// EngineSource reports every GPU and the engine serving from it.
type EngineSource interface {
	// Engines returns one entry per worker, in a stable order.
	Engines(ctx context.Context) ([]Engine, error)
}

// Engine is one GPU and its inference engine.
type Engine struct {
	// Worker is the router's name for the engine; decisions, sessions and
	// requests refer to it by this name.
	Worker string
	Node   string // host the GPU is in
	GPU    string // marketing name, "NVIDIA GeForce RTX 4090"
	// GPUCount is how many GPUs the engine runs on (tensor parallelism
	// over GPUs like GPU); 0 and 1 mean one. The card names them all.
	GPUCount int
	Model    string // served model, "" when unknown
	// Image is the container image the engine runs, "" outside containers.
	Image string
	// State is the engine's life stage: starting, loading, ready,
	// restarting, failed or stopped ("" when the source does not tell).
	State string
	// LogTail is the engine's last output lines, which a card shows while
	// the engine is not ready (why it failed to start).
	LogTail []string
	// LoadPhase is where a loading engine's start is, in words ("capturing
	// CUDA graphs"); "" when it is not loading or the source cannot tell.
	// LoadProgress is that phase's completion in percent, -1 when unknown.
	LoadPhase    string
	LoadProgress int
	// Diagnosis says why the engine failed and how to fix it, in one
	// sentence, when the source recognises the cause; Err then holds the
	// bare error.
	Diagnosis string

	MemoryUsed  uint64 // bytes; 0 when the source cannot tell
	MemoryTotal uint64 // bytes; 0 when unknown
	// MemoryReserved says MemoryUsed is no reading but what the engine
	// reserves when it starts (vLLM's --gpu-memory-utilization share of
	// the GPU), as for a simulated GPU, which has no driver to ask.
	// MemoryInUse is then what of it holds data: the weights and the KV
	// blocks of running requests; 0 when the source cannot tell.
	MemoryReserved bool
	MemoryInUse    uint64
	// UtilizationPct and TemperatureC are negative when the source cannot
	// tell (nodes.GPU uses the same convention).
	UtilizationPct int
	TemperatureC   int
	// PowerDrawW is the board's power draw and PowerLimitW its enforced
	// limit, in watts; negative when the source cannot tell.
	PowerDrawW  float64
	PowerLimitW float64

	// Memory by owner, when MemoryByOwnerKnown is set (false when the
	// source cannot list the GPU's processes, as for a simulated GPU):
	// MemoryHearth is held by Hearth's engine processes, MemoryOther by
	// every other program, and OtherProcesses names those programs.
	// MemoryUsed may exceed the sum: the driver keeps some for itself.
	MemoryByOwnerKnown bool
	MemoryHearth       uint64 // bytes
	MemoryOther        uint64 // bytes
	OtherProcesses     []GPUProcess

	// GPULost is set when the driver reports the GPU gone
	// (ERROR_GPU_IS_LOST, a driver reset): its engine is stopped and the
	// router no longer sends it work. GPUErr is the driver's words. The
	// entry returns to normal when the GPU comes back.
	GPULost bool
	GPUErr  string

	// PlanNote says, in one sentence, why the engine got a smaller plan
	// than the GPU could hold alone ("another program holds 6.0 GiB:
	// context cut to 16,384 tokens"); "" when it got the full one.
	PlanNote string
	// TokenizerNote says, in one sentence, that the engine's start-up
	// self-check found its tokenization differing from Hearth's (where,
	// and that its model is routed on predicted caches) or could not run;
	// "" when it agreed or none ran.
	TokenizerNote string
	// KVEventsNote says, in one sentence, that the engine's start-up
	// KV-event self-check found its events not naming the probe's blocks
	// as Hearth predicts (how many matched, the first difference, and that
	// it is routed on predicted caches) or could not run; "" when they
	// matched or none ran.
	KVEventsNote string

	// KV cache, in blocks (sim.Stats / vLLM num_gpu_blocks).
	TotalBlocks      int
	UsedBlocks       int // held by running requests
	CachedFreeBlocks int // free but still holding reusable KV

	Running, Waiting int

	// Cumulative counters; the console turns them into rates. They may reset
	// when an engine restarts (a drop is treated as a restart, not a rate).
	PrefixQueries    int64 // prompt tokens looked up in the prefix cache
	PrefixHits       int64 // of those, tokens found
	GenerationTokens int64 // output tokens produced

	// Tiers below the GPU. The engine may keep KV blocks it evicts from
	// the GPU in host RAM (RAMTotalBlocks 0: it has no RAM tier) and in
	// its node's SSD store (KVStoreSource reports that one, shared by the
	// node's engines). RAM blocks are the GPU's block size; RAMUsedBlocks
	// are those holding KV.
	RAMTotalBlocks int
	RAMUsedBlocks  int
	// Cumulative counters, like the ones above. RAMHitTokens and
	// DiskHitTokens are prompt tokens of PrefixQueries that the GPU cache
	// did not hold and that were loaded from the RAM tier or from the
	// node's SSD store instead of recomputed; PrefixHits counts only the
	// GPU's hits, so the three never count a token twice.
	RAMHitTokens  int64
	DiskHitTokens int64
	// LoadedBytes were copied into the GPU from the tiers below it,
	// StoredBytes out of it into them.
	LoadedBytes int64
	StoredBytes int64

	// PrefillTokensPerSec is the engine's prefill speed, used to turn cached
	// tokens into prefill seconds saved; 0 takes Config.PrefillTokensPerSec.
	PrefillTokensPerSec float64

	// Err is the last error reading this engine ("metrics: connection
	// refused"); the card shows it instead of hiding the GPU.
	Err string
}

// GPUProcess is a program other than Hearth's engines that holds memory on
// a GPU.
type GPUProcess struct {
	Name      string // executable name, "python3"; "" when the driver hides it
	PID       int
	UsedBytes uint64 // 0 when the driver cannot tell (some Windows/WSL setups)
}

// KVStoreSource reports the SSD store of every node: the tier below the
// engines' RAM where a node keeps KV blocks for all of its engines.
type KVStoreSource interface {
	// KVStores returns one entry per node that has a store, in a stable
	// order.
	KVStores(ctx context.Context) ([]KVStore, error)
}

// KVStore is one node's SSD store of KV blocks.
type KVStore struct {
	Node string // host, as in Engine.Node; the node's engines share it
	Dir  string // where the store keeps its files

	UsedBytes     int64 // held by blocks
	CapacityBytes int64 // the most it may hold; 0 when unbounded or unknown
	// FreeDiskBytes is what the store's file system has left; negative
	// when the source cannot tell.
	FreeDiskBytes int64
	Blocks        int // blocks held

	// Cumulative counters; the console turns them into rates, and a drop
	// is a restart, as for Engine's counters. Hits and Misses are block
	// lookups found and not found; EvictedBlocks were removed to make
	// room, CorruptDropped removed because they failed their check on
	// reading; ReadBytes and WrittenBytes are the store's disk traffic.
	Hits, Misses   int64
	EvictedBlocks  int64
	CorruptDropped int64
	ReadBytes      int64
	WrittenBytes   int64

	// Err is the last error reading this store ("disk full"); the panel
	// shows it instead of hiding the store.
	Err string
}

// ModelSource reports the models served on demand, when hearth up serves
// more models than its GPUs hold at once: which are resident on each GPU,
// and the latest loads, wakes, sleeps and stops of their engines.
type ModelSource interface {
	// Residency returns the models served on demand and their latest
	// transitions; an empty Residency when every model has GPUs of its
	// own.
	Residency(ctx context.Context) (Residency, error)
}

// Residency is the models served on demand and what their engines did.
type Residency struct {
	// Models are every model served on demand, in a stable order (by GPU,
	// then name).
	Models []ResidentModel
	// Transitions are the latest loads, wakes, sleeps and stops, in any
	// order; the console shows the newest first.
	Transitions []ModelTransition
}

// Model states, as the models' manager names them.
const (
	ModelResident  = "resident"
	ModelLoading   = "loading"
	ModelSleeping  = "sleeping"
	ModelUnloading = "unloading"
	ModelOnDisk    = "on disk"
)

// ResidentModel is one model served on demand.
type ResidentModel struct {
	Name string
	// GPU names the GPUs it is served from, as the engines' workers do
	// ("node/gpu0"); its models share them.
	GPU string
	// State is one of the Model states above.
	State    string
	InFlight int
	Pinned   bool
	// Share is the fraction of the GPU's memory its engine takes while
	// resident; 0 when not known.
	Share float64
}

// Transition kinds.
const (
	TransitionLoad  = "load"  // a cold start of the engine
	TransitionWake  = "wake"  // from sleep
	TransitionSleep = "sleep" // to sleep, memory given back
	TransitionStop  = "stop"  // the engine stopped
)

// ModelTransition is one move of a model's engine.
type ModelTransition struct {
	Model string
	GPU   string // as ResidentModel.GPU
	Kind  string // a Transition kind
	At    time.Time
	Took  time.Duration
	Err   string // why it failed; "" when it did not
}

// RouterSource reports the router's recent decisions and queue.
type RouterSource interface {
	// Decisions returns up to n of the latest routing decisions, newest first.
	Decisions(ctx context.Context, n int) ([]Decision, error)
	// QueueLen is how many requests wait for a worker.
	QueueLen(ctx context.Context) (int, error)
}

// Decision is one routing decision (router.Decision).
type Decision struct {
	RequestID string
	At        time.Time
	Policy    string
	Worker    string // the winner
	Reason    string

	PromptBlocks     int
	CachedBlocks     int     // the winner's overlap
	PredictedHitRate float64 // CachedBlocks / PromptBlocks
	Queued           time.Duration

	Candidates []Candidate
}

// Candidate is one worker as the policy weighed it.
type Candidate struct {
	Worker               string
	CachedBlocks         int
	ActiveBlocks         int
	PendingPrefillTokens int
	Cost                 float64 // lower is better; 0 for policies without one
}

// TrafficSource reports finished and running requests and the agent
// sessions they belong to (the gateway knows both).
type TrafficSource interface {
	// RequestsSince returns the requests that arrived at or after since, in
	// any order. The console asks for at most Config.StatsWindow.
	RequestsSince(ctx context.Context, since time.Time) ([]Request, error)
	// Sessions returns the known agent sessions, in any order.
	Sessions(ctx context.Context) ([]Session, error)
}

// Request is one client request. Its ID is the one the router decided it
// under (Decision.RequestID).
type Request struct {
	ID           string
	At           time.Time // arrival
	SessionID    string    // the client's session id; "" when it sent none
	Client       string    // "claude-code", "codex", "opencode", or a user agent
	Worker       string
	PromptTokens int
	CachedTokens int // prompt tokens served from the prefix cache
	OutputTokens int // so far
	// PredictedOutputTokens is the output length the request was routed
	// with (the client's hint or the gateway's estimate); 0 when none, or
	// while it runs.
	PredictedOutputTokens int
	TTFT                  time.Duration // 0 while no token has been sent, or on failure
	// Hints are the agent hints it was served with and where each came
	// from, as the x-hearth-hints header says them:
	// "priority=-1(inferred),osl=512(client)"; "" for none.
	Hints string
}

// Session is one agent conversation, identified by the client's session id
// (prompt_cache_key, x-session-id, metadata.user_id, ...).
type Session struct {
	ID         string
	Client     string // "claude-code", "codex", "opencode", or a user agent
	Worker     string // where its last turn ran
	LastActive time.Time
	// Turns are the session's requests, turns and side requests, in order
	// of arrival.
	Turns []Turn
}

// Turn kinds.
const (
	// TurnKindTurn is a turn of the agent's conversation.
	TurnKindTurn = "turn"
	// TurnKindSide is a request the agent makes beside its conversation (a
	// title, a topic check, a quota probe, a compaction). It is shown
	// apart and never compared with the turns.
	TurnKindSide = "side"
)

// Turn is one request of a session.
type Turn struct {
	At           time.Time
	Kind         string // TurnKindTurn or TurnKindSide
	Worker       string
	PromptTokens int
	CachedTokens int
	OutputTokens int
	// Diverged is set when a prefix the engine had for this conversation
	// was lost or changed since the previous turn: DivergedBlock is the
	// first 16-token block the engine did not serve from its cache, and
	// Cause says why: "evicted" (gone from the worker's GPU),
	// "routed_elsewhere" (the turn ran on a worker that did not have it)
	// or "prompt_changed" (the client rewrote its prompt at that block: a
	// timestamp in the system prompt, a reordered tool list).
	Diverged      bool
	DivergedBlock int
	Cause         string
	// ChangedFrom and ChangedTo are, for prompt_changed, the text around
	// the first differing block in the previous turn's prompt and in this
	// one; "" when unknown.
	ChangedFrom, ChangedTo string
}

// HealthSource runs the host's checks (driver, CUDA, GPU memory, Docker and
// its NVIDIA runtime, disks, RAM, port, multicast, data directory): the
// checks of `hearth doctor`.
type HealthSource interface {
	// Checks returns the checks in display order. The checks take seconds,
	// so a source may answer from a cache of a few seconds' age.
	Checks(ctx context.Context) ([]HealthCheck, error)
}

// HealthCheck is one check's verdict.
type HealthCheck struct {
	Name string
	// Status is "pass", "warn" or "fail".
	Status   string
	Evidence string // one line: what was found
	Fix      string // one line: what to do; "" when it passed
}

// KeyStore keeps the API keys clients and the console log in with.
type KeyStore interface {
	// CreateKey makes a key with a display name. The secret is returned
	// only here; the store keeps what it needs to check it.
	CreateKey(ctx context.Context, name string) (apikey.Key, string, error)
	// CreateScopedKey is CreateKey with a scope: apikey.ScopeInference (what
	// CreateKey makes) or apikey.ScopeAdmin.
	CreateScopedKey(ctx context.Context, name, scope string) (apikey.Key, string, error)
	// Keys lists the keys that are not revoked, oldest first.
	Keys(ctx context.Context) ([]apikey.Key, error)
	// RevokeKey revokes a key by id; ErrNoSuchKey if there is none.
	RevokeKey(ctx context.Context, id string) error
	// CheckKey returns the key a secret belongs to, or ErrNoSuchKey.
	CheckKey(ctx context.Context, secret string) (apikey.Key, error)
}

// KeylessClients reports the clients that used the API while it needed no
// key (the gateway sees them).
type KeylessClients interface {
	// ClientsWithoutKey returns those seen at or after since, in any order.
	ClientsWithoutKey(ctx context.Context, since time.Time) ([]KeylessClient, error)
}

// KeylessClient is a client that used the API without a key.
type KeylessClient struct {
	Client   string // "claude-code", "codex", "opencode", or a user agent's product
	LastSeen time.Time
}

// SettingsStore keeps the settings the console edits.
type SettingsStore interface {
	Settings(ctx context.Context) (Settings, error)
	// SaveSettings validates and applies s; a validation failure wraps
	// ErrInvalidSettings and its message is shown to the user.
	SaveSettings(ctx context.Context, s Settings) error
}

// Settings are the runtime-editable settings.
type Settings struct {
	Policy   string   // routing policy
	Policies []string // the policies to choose from (read only)
	Models   []string // served models, targets of aliases (read only)
	Aliases  []Alias
}

// Alias maps a client's model name or pattern ("claude-*") to a served model.
type Alias struct {
	From, To string
}

// Sentinel errors stores return.
var (
	ErrNoSuchKey       = errors.New("no such key")
	ErrInvalidSettings = errors.New("invalid settings")
)

// ClusterSource reports the LAN cluster this node belongs to and acts on
// it for the console's owner. A daemon in no cluster passes none, and the
// Cluster page says how to create one.
type ClusterSource interface {
	// Cluster returns the cluster as this node sees it: every node it has
	// heard of, itself included, and the nodes waiting to join.
	Cluster(ctx context.Context) (Cluster, error)
	// RevokeNode revokes a node's certificate on every node it reaches;
	// ErrNoSuchNode when no node has that id.
	RevokeNode(ctx context.Context, nodeID string) error
	// AcceptJoin admits a node that asked to join; RejectJoin turns it
	// away. ErrNoSuchJoinRequest when no request has that id (already
	// answered, or expired); an error wrapping errors.ErrUnsupported when
	// this daemon takes no join requests.
	AcceptJoin(ctx context.Context, requestID string) error
	RejectJoin(ctx context.Context, requestID string) error
}

// Cluster is one LAN cluster as a node sees it.
type Cluster struct {
	ID     string // the cluster's id, "3f9a0c1d2e4b"
	SelfID string // this node's id
	// JoinToken is the secret another machine joins with
	// (hearth up --join); "" when this node cannot invite: only the node
	// that created the cluster holds the CA key. The console shows it to
	// the owner only, never on a live update.
	JoinToken string
	Nodes     []ClusterNode
	// JoinRequests are nodes that asked to join and wait for the owner.
	JoinRequests []JoinRequest
}

// Cluster node states, as the node judges its peers by the age of their
// last heartbeat.
const (
	NodeUp      = "up"
	NodeSuspect = "suspect" // a few heartbeats missed; still routed to
	NodeDown    = "down"    // its engines are out of routing
	NodeRevoked = "revoked" // for good
)

// ClusterNode is one node of the cluster.
type ClusterNode struct {
	ID      string
	Name    string // hearth up --node, the host name by default
	Address string // host:port of its cluster port
	State   string // NodeUp, NodeSuspect, NodeDown or NodeRevoked
	Self    bool   // the node this console runs on
	GPUs    []string
	Engines []ClusterEngine
	// LastSeen is when this node last heard from it, on its own clock;
	// zero when never (a node known only from the revocation list).
	LastSeen time.Time
	// Drained, when not empty, says why the node takes no new requests:
	// "drained (manual)", "drained (GPU taken by another program)".
	Drained string
	// Queued is how many requests wait in the node's router for KV room
	// (every engine of their model full).
	Queued int
}

// ClusterEngine is one engine in service on a node.
type ClusterEngine struct {
	Worker  string // the router's name for it; a peer's engines are "node/gpuN"
	Model   string
	Running int // requests its owner's router has on it
	// Full says its owner's router finds its KV cache full: requests
	// sent to its owner wait for room, or go elsewhere.
	Full bool
}

// JoinRequest is a node that asked to join the cluster. Code is a short
// code that the joining machine prints too: the owner accepts only when
// the two match, which tells the machine on the owner's desk from an
// impostor on the LAN.
type JoinRequest struct {
	ID       string
	Name     string
	Address  string
	Code     string
	Received time.Time
}

// Errors a ClusterSource returns.
var (
	ErrNoSuchNode        = errors.New("no such node")
	ErrNoSuchJoinRequest = errors.New("no such join request")
)
