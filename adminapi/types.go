package adminapi

import (
	"fmt"
	"time"
)

// The JSON shapes of the API. A response's fields are in the order of
// their keys, as a map's would be, and a list is never null.

// EngineList is GET /api/v1/engines.
type EngineList struct {
	Engines []Engine `json:"engines"`
	// Raw is the daemon's answer as it came (Client only), for commands
	// that print it as it is.
	Raw []byte `json:"-"`
}

// Engine is one engine of the daemon.
type Engine struct {
	Name    string `json:"name"`
	Runtime string `json:"runtime"`
	Kind    string `json:"kind"`
	Model   string `json:"model"`
	GPU     int    `json:"gpu"`
	// GPUs are the CUDA indices of every GPU of a tensor-parallel engine,
	// GPU first; empty for an engine on one GPU.
	GPUs      []int  `json:"gpus,omitempty"`
	GPUName   string `json:"gpu_name,omitempty"`
	State     string `json:"state"`
	PID       int    `json:"pid,omitempty"`
	Container string `json:"container,omitempty"`
	Image     string `json:"image,omitempty"`
	BaseURL   string `json:"base_url"`
	Restarts  int    `json:"restarts"`
	// Phase and Progress say where a loading engine's start is
	// (runtime.LoadPhase; percent of the phase), when its log tells.
	Phase    string `json:"phase,omitempty"`
	Progress *int   `json:"progress,omitempty"`
	// LastError ends with the diagnosis's fix when Cause names one
	// (runtime.Cause: "out_of_memory", "gated_model", …).
	LastError string    `json:"last_error"`
	Cause     string    `json:"cause,omitempty"`
	Since     time.Time `json:"since"`
	KVBlocks  int       `json:"kv_blocks,omitempty"`
	// Tokenizer is the start-up self-check of the engine's tokenization
	// against Hearth's; absent until the engine was ready once.
	Tokenizer *TokenizerCheck `json:"tokenizer,omitempty"`
	// KVEvents is the start-up check of the engine's KV events against the
	// blocks Hearth predicts for a probe prompt; absent when none ran
	// (the engine publishes none, or its tokenization already differs).
	KVEvents *KVEventsCheck `json:"kv_events,omitempty"`
}

// KVEventsCheck is what the KV-event self-check found when the engine
// became ready: State "match", "differs" (then FirstDifference, the first
// probe block not matched, and Cause, what the events said instead; the
// engine is routed on predicted caches) or "unchecked" (then Detail says
// why). Matched of Blocks probe blocks were named as Hearth predicts.
// Summary says it in one sentence.
type KVEventsCheck struct {
	State           string `json:"state"`
	Matched         int    `json:"matched"`
	Blocks          int    `json:"blocks"`
	FirstDifference *int   `json:"first_difference,omitempty"`
	Cause           string `json:"cause,omitempty"`
	Detail          string `json:"detail,omitempty"`
	Summary         string `json:"summary"`
}

// Text is the check as a table cell: "12/12", "0/12", "unchecked"; "-"
// for none.
func (c *KVEventsCheck) Text() string {
	switch {
	case c == nil:
		return "-"
	case c.State == "unchecked":
		return c.State
	}
	return fmt.Sprintf("%d/%d", c.Matched, c.Blocks)
}

// TokenizerCheck is what the self-check found when the engine became
// ready: State "agrees", "differs" (then Sample, Position, the ids at it,
// -1 for a side that had ended, and Hearth's text Near it) or
// "unchecked" (then Detail says why). Summary says it in one sentence.
type TokenizerCheck struct {
	State    string `json:"state"`
	Sample   string `json:"sample,omitempty"`
	Position *int   `json:"position,omitempty"`
	HearthID *int64 `json:"hearth_id,omitempty"`
	EngineID *int64 `json:"engine_id,omitempty"`
	Near     string `json:"near,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Summary  string `json:"summary"`
}

// Text is the check as a table cell: "agrees", "differs at 412",
// "unchecked"; "-" for none.
func (c *TokenizerCheck) Text() string {
	switch {
	case c == nil:
		return "-"
	case c.Position != nil:
		return fmt.Sprintf("%s at %d", c.State, *c.Position)
	}
	return c.State
}

// SessionList is GET /api/v1/sessions: the agent sessions the gateway
// keeps, most recently active first.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	Raw      []byte    `json:"-"` // as EngineList.Raw
}

// Session is one agent session.
type Session struct {
	ID         string    `json:"id"`
	Client     string    `json:"client"`
	Worker     string    `json:"worker"` // where its last turn ran
	LastActive time.Time `json:"last_active"`
	// ContextTokens is the prompt size of the session's last turn (side
	// requests do not count); 0 before the first turn.
	ContextTokens int    `json:"context_tokens"`
	Turns         []Turn `json:"turns"`
}

// Turn is one request of a session: a turn of the conversation, or a side
// request beside it (kind "side"), which is never compared with the turns
// and so never diverges.
type Turn struct {
	// N is the request's place in the session, from 1, in order of
	// arrival; turns and side requests share the count.
	N            int       `json:"n"`
	Kind         string    `json:"kind"` // "turn" or "side"
	At           time.Time `json:"at"`
	Worker       string    `json:"worker"`
	PromptTokens int       `json:"prompt_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	OutputTokens int       `json:"output_tokens"`
	// SharedBlocks is how many leading blocks the prompt shares with the
	// previous turn's.
	SharedBlocks int `json:"shared_blocks"`
	// DivergedAtBlock is null unless a prefix the engine had was lost or
	// changed; Cause then says why: evicted, routed_elsewhere or
	// prompt_changed (api.Cause*).
	DivergedAtBlock *int    `json:"diverged_at_block"`
	Cause           *string `json:"cause"`
	// Changed is, for prompt_changed, the text around the first differing
	// block in the previous turn's prompt and in this one.
	Changed *Change `json:"changed,omitempty"`
}

// Change is what a client rewrote in its prompt.
type Change struct {
	Was string `json:"was"`
	Now string `json:"now"`
}

// NodeList is GET /api/v1/nodes. Cluster is "" (and NodeID absent) when
// the node belongs to no cluster.
type NodeList struct {
	Cluster string `json:"cluster"`
	NodeID  string `json:"node_id,omitempty"` // this node's
	Nodes   []Node `json:"nodes"`
	Raw     []byte `json:"-"` // as EngineList.Raw
}

// Node is one member of the cluster, as this node last heard of it.
type Node struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Address  string       `json:"address"`
	State    string       `json:"state"`
	Self     bool         `json:"self,omitempty"`
	GPUs     []NodeGPU    `json:"gpus"`
	Engines  []NodeEngine `json:"engines"`
	LastSeen *time.Time   `json:"last_seen,omitempty"`
	// Drained, when not empty, says why the node takes no new requests:
	// "manual", "GPU taken by another program", or both.
	Drained string `json:"drained,omitempty"`
}

// NodeGPU is one GPU of a node.
type NodeGPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
}

// NodeEngine is one engine in service on a node, as its heartbeat tells.
type NodeEngine struct {
	Name        string `json:"name"`
	Model       string `json:"model"`
	Incarnation string `json:"incarnation"` // changes when the engine restarts
	// URL is the engine's OpenAI API root as peers reach it: through the
	// owning node's proxy.
	URL                 string  `json:"url"`
	CapacityBlocks      int     `json:"capacity_blocks"`
	RAMCapacityBlocks   int     `json:"ram_capacity_blocks,omitempty"`
	BlockBytes          int     `json:"block_bytes,omitempty"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec,omitempty"`
	LoadBytesPerSec     float64 `json:"load_bytes_per_sec,omitempty"`
	Approximate         bool    `json:"approximate,omitempty"`
	Running             int     `json:"running"` // requests the owner's router has on it
	State               string  `json:"state,omitempty"`
}

// NodeDrain is GET /api/v1/node and the answer of POST
// /api/v1/node/drain and /api/v1/node/undrain: whether this node takes new
// requests. Drained is set while either reason holds: Manual (hearth node
// drain) or GPUTaken (another program holds the GPU's memory; TakenBy says
// which, and how much). Text says it in the words hearth node prints.
type NodeDrain struct {
	Drained  bool   `json:"drained"`
	Manual   bool   `json:"manual"`
	GPUTaken bool   `json:"gpu_taken"`
	TakenBy  string `json:"taken_by,omitempty"`
	Text     string `json:"text"`
	Raw      []byte `json:"-"` // as EngineList.Raw
}

// JoinRequestList is GET /api/v1/cluster/join-requests. CanInvite is
// false on a node without the cluster's CA key: requests go to the node
// that created the cluster.
type JoinRequestList struct {
	CanInvite bool          `json:"can_invite"`
	Cluster   string        `json:"cluster"`
	Requests  []JoinRequest `json:"requests"`
	Raw       []byte        `json:"-"` // as EngineList.Raw
}

// JoinRequest is a machine asking to join, waiting for the owner.
type JoinRequest struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Address  string    `json:"address"`
	Code     string    `json:"code"` // the joiner prints it too
	Received time.Time `json:"received"`
}

// Outcome answers a cluster operation: the id it acted on, under the key
// that names the act; Warning when a leave could not tell the cluster.
type Outcome struct {
	Accepted string `json:"accepted,omitempty"`
	// Model is the model a models operation applied to, and Action what
	// was done (load, unload, pin, unpin).
	Model    string `json:"model,omitempty"`
	Action   string `json:"action,omitempty"`
	Left     string `json:"left,omitempty"`
	Rejected string `json:"rejected,omitempty"`
	Revoked  string `json:"revoked,omitempty"`
	Warning  string `json:"warning,omitempty"`
	Raw      []byte `json:"-"` // as EngineList.Raw
}

// ModelList is GET /api/v1/models.
type ModelList struct {
	Models []Model `json:"models"`
	Raw    []byte  `json:"-"` // as EngineList.Raw
}

// Model is a configured model and where it is: resident, loading,
// sleeping, unloading or on disk.
type Model struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	InFlight int    `json:"in_flight"`
	Pinned   bool   `json:"pinned"`
	// GPU names the GPUs it is served from ("node/gpu0"), which its
	// models share; Share is its planned fraction of their memory, 0 when
	// not planned.
	GPU   string  `json:"gpu,omitempty"`
	Share float64 `json:"share,omitempty"`
	// Last is its engine's latest load, wake, sleep or stop; nil for none
	// yet.
	Last *ModelTransition `json:"last,omitempty"`
}

// ModelTransition is one move of a model's engine: a load (a cold
// start), a wake, a sleep or a stop, when it began and how long it took.
type ModelTransition struct {
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	TookMS int64     `json:"took_ms"`
	Error  string    `json:"error,omitempty"`
}
