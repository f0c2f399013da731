package kvevents

import "bytes"

// Hybrid models keep several KV caches, one per group of layers, and the
// engines publish each group's blocks in events of their own. Only the
// blocks of full-attention layers are a prompt's prefix block for block:
// the router indexes those, and whatever checks the events against its
// hashes counts those alone.

// FullAttentionComponent reports whether SGLang's component type (empty
// when it sends none) names full-attention blocks: sliding-window pages and
// Mamba state checkpoints are not a prompt's prefix.
func FullAttentionComponent(componentType []byte) bool {
	return len(componentType) == 0 || bytes.EqualFold(componentType, []byte("full"))
}

// PrefixSpecKind reports whether a KV-cache group of the kind vLLM names
// (kv_cache_spec_kind; vllm/v1/kv_cache_interface.py, KVCacheSpecKind)
// keeps every block of a prompt: full attention, MLA and attention with
// sink tokens do; sliding-window and chunked-local attention drop blocks
// out of their window, Mamba keeps states, not token blocks, and
// encoder-only and cross attention do not cache the prompt's tokens. A
// full-attention kind with a window (a sliding window served as full
// attention without the hybrid allocator) still stores every block.
func PrefixSpecKind(kind []byte) bool {
	switch string(kind) {
	case "full_attention", "mla_attention", "sink_full_attention":
		return true
	}
	return false
}

// InPrefixGroup reports whether the event's blocks are a prompt's prefix
// as far as the event itself says: its component type is full attention
// or absent, and its group's kind, when named, keeps every block; an event
// that names no kind is taken to be of group 0, where vLLM puts full
// attention when it has any. vLLM's BlockRemoved names its group alone: a
// reader of removals remembers the kind the group's stored events named
// (router/ingest).
func (e *Event) InPrefixGroup() bool {
	if !FullAttentionComponent(e.ComponentType) {
		return false
	}
	if len(e.SpecKind) > 0 {
		return PrefixSpecKind(e.SpecKind)
	}
	return e.GroupIdx == 0
}
