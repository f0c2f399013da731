package sim

import (
	"time"

	"github.com/hearth-llm/hearth/kvevents"
)

// Request is one generation request as the engine core sees it.
type Request struct {
	ID string
	// Prompt is the prompt's token ids.
	Prompt []uint32
	// Output is the tokens the engine emits, in order; its length is the
	// number of tokens to generate. The caller decides the text (an answer or
	// a tool call) and tokenizes it; the core only schedules and times it.
	Output []uint32
	// Priority orders the waiting queue under the priority scheduling policy:
	// lower values run first, as in vLLM, or higher ones with
	// Config.PriorityHigherFirst, as in SGLang.
	Priority int
	// StopAtEnd marks the last Output token as an end-of-sequence token: the
	// request then finishes with reason "stop" instead of "length".
	StopAtEnd bool
	// CacheSalt is the request's cache_salt, "" for none: its blocks are
	// cached apart from every other salt's. vLLM hashes it into the first
	// block's extra keys and lists it there in the BlockStored event;
	// SGLang keys its radix tree by it, hashes it into its pages and
	// names it in each BlockStored.
	CacheSalt string
}

// TokenOutput is one token produced by a scheduler step.
type TokenOutput struct {
	RequestID string
	Token     uint32
	Index     int // 0 for the first generated token
	// CachedTokens is the number of prompt tokens served from the prefix
	// cache; set on every output of a request.
	CachedTokens int
	// HostCachedTokens is the part of CachedTokens loaded from the
	// host-RAM tier rather than found on the GPU (SGLang's
	// cached_tokens_total{cache_source="host"}).
	HostCachedTokens int
	// StoreCachedTokens is the part of CachedTokens loaded from the node
	// store (SGLang's cache_source="storage_file").
	StoreCachedTokens int
	PromptTokens      int
	// QueueTime is how long, in engine time, the request waited before it
	// was first scheduled (vllm:request_queue_time_seconds).
	QueueTime time.Duration
	Finished  bool
	// FinishReason is "length", "stop" or "abort" when Finished.
	FinishReason string
}

// EventSink receives the KV events of each scheduler step as one batch, in
// the order they happened. now is the engine's clock when the step ended.
// The sink must not keep the slice after it returns.
type EventSink interface {
	PublishKVEvents(now time.Duration, events []kvevents.Event)
}

// Stats is a snapshot of an engine's counters and gauges, named after the
// vLLM metrics they feed.
type Stats struct {
	Running, Waiting int
	NumGPUBlocks     int
	BlockSize        int
	UsedBlocks       int     // blocks referenced by running requests
	CachedFreeBlocks int     // free blocks that still hold reusable KV
	CachedBlocks     int     // blocks holding reusable KV, in use or free
	KVUsage          float64 // UsedBlocks / NumGPUBlocks, vllm:kv_cache_usage_perc
	PrefixQueries    int64   // prompt tokens looked up in the prefix cache
	PrefixHits       int64   // of those, tokens found
	// NumCPUBlocks is the size of the host-RAM tier in blocks (0: off) and
	// CPUCachedBlocks the blocks it holds.
	NumCPUBlocks    int
	CPUCachedBlocks int
	// ExternalPrefixQueries and ExternalPrefixHits are vLLM's
	// vllm:external_prefix_cache_{queries,hits}, counted only with a KV
	// connector (here the host-RAM tier) when a request is first scheduled:
	// the tokens the GPU prefix cache did not have, and of those the tokens
	// loaded from host RAM. The GPU counters above do not include them.
	ExternalPrefixQueries int64
	ExternalPrefixHits    int64
	// CPULoadedBlocks counts blocks loaded from host RAM, re-admissions
	// after preemption included.
	CPULoadedBlocks int64
	// CPUStoredBlocks counts blocks written to host RAM.
	CPUStoredBlocks int64
	// Node store (Config.Store): blocks loaded from it (re-admissions
	// included), blocks written to it, and the loads and writes that
	// failed (a block gone or corrupt: recomputed; a full disk).
	DiskLoadedBlocks int64
	DiskStoredBlocks int64
	DiskLoadErrors   int64
	DiskStoreErrors  int64
	Preemptions      int64
	PromptTokens     int64
	GenerationTokens int64
}
