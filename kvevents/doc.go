// Package kvevents is the wire format of the KV-cache events that vLLM and
// SGLang publish over ZMQ, both ways: Decoder reads a payload into a Batch,
// AppendBatch writes one, and the frame functions build and split the ZMQ
// messages around it. The simulated engine (runtime/sim) publishes with it,
// the router (router) and the block manager (kvbm) read with it, so that the
// format has one copy.
//
// It imports only the standard library and the msgpack module, and no other
// Hearth package; it opens no sockets, which stay with its users.
//
// # Payload
//
// A payload is one msgpack-encoded EventBatch. Engines have used several
// encodings of it and the Decoder accepts all of them:
//
//   - the batch: an array [ts float64, events array, data_parallel_rank
//     int|nil] (msgspec's array_like form; the rank may be missing) or a map
//     with the keys "ts", "events" and "data_parallel_rank";
//   - each event: a map whose "type" key names the class (vLLM since
//     mid-2026), or a positional array whose first element names it (older
//     vLLM, SGLang), with the fields in class order:
//     BlockStored:  [tag, block_hashes, parent_block_hash, token_ids,
//     block_size, lora_id, medium, lora_name, extra_keys, group_idx,
//     kv_cache_spec_kind, kv_cache_spec_sliding_window, ...]
//     BlockRemoved: [tag, block_hashes, medium, group_idx]
//     AllBlocksCleared: [tag]
//     Event.SpecKind and Event.SlidingWindow hold the last two (vLLM names
//     its KV-cache group's kind there since about v0.33).
//     Trailing fields may be missing (msgspec omits defaults); fields the
//     Decoder does not know, in either form, are skipped, and so are
//     classes it does not know (KindUnknown).
//   - SGLang's positional classes, read when Decoder.Format is
//     FormatSGLang: BlockStored [tag, block_hashes, parent_block_hash,
//     token_ids, block_size, lora_id, medium], then its wire extensions
//     (same tag): with --enable-kv-events-component-types a component
//     type string ("full", "swa", "mamba"), and for a salted request
//     (BlockStoredWithMetadata) a metadata map {"cache_salt": ...}, where
//     vLLM has lora_name (hence a Format per engine); BlockRemoved [tag,
//     block_hashes, medium, component_type?].
//   - SGLang's map events (v0.5.23) name the same fields and carry a
//     salted request's "cache_salt" (and "session_id") at the top level;
//     a nested "metadata" map is read too. Event.CacheSalt holds the salt
//     and Event.ComponentType the component, whichever form sent them.
//
// Block hashes are the engine's own ids and become uint64 keys. An int
// keeps its 64-bit two's complement pattern: vLLM's uint64 hashes of 2^63 or
// more arrive as msgpack uint64, SGLang's (the first 8 bytes of a SHA-256 as
// a signed int64) may be negative, and both fit. Bytes are vLLM's block
// hash itself (a 32-byte SHA-256 digest by default), which its GPU cache
// publishes as an int only by keeping the low 64 bits
// (maybe_convert_block_hash: int.from_bytes(hash, "big") & (2^64-1)): so
// bytes become those same 64 bits (BytesHashKey), and a block has one key
// whichever way it was reported. vLLM sends bytes in two cases: its GPU
// cache with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0, and its offloading
// connector's CPU tier always (the raw hash, with no parent, no token ids,
// block_size 0 and medium "CPU" in v0.20), whose blocks a consumer can
// only place through the GPU BlockStored events that carried the same key.
// An event whose hashes came as bytes has BytesHashes set, and AppendBatch
// writes it that way.
//
// A missing or nil medium means the GPU. ParseMedium folds the names of
// vLLM ("GPU", "CPU"), SGLang ("GPU", "CPU_PINNED", "DISK", "EXTERNAL") and
// offloading connectors ("CPU_PINNED", "DISK", "STORAGE", ...) into
// MediumGPU, MediumCPU and MediumDisk, ignoring case.
//
// AppendBatch writes each Format as the engine it names does, down to the
// integer widths, so that a payload from the simulated engine exercises a
// consumer as a real one would; every format it writes decodes back to the
// same Batch.
//
// # Performance
//
// The Decoder is on the router's ingest path, which must keep up with every
// engine's cache churn: it reads integer arrays in place, keeps strings in
// the payload, and reuses its buffers, so a batch decodes without
// allocating once they have grown. AppendBatch sizes its output once and
// allocates nothing else. For a busy step of 256 stored blocks of 16 tokens
// and 256 removed (26 kB in map form), measured on a shared 2-core AMD
// EPYC VM with
//
//	go test ./kvevents/ -run '^$' -bench . -cpu 1
//
// Decode took 17.5-18.4 µs in map form and 14.4-15.0 µs in the positional
// forms (about 14 and 17 million stored blocks a second), 0 allocations;
// AppendBatch took 13.4-15.1 µs and one allocation of 40 kB.
//
// The golden payloads in testdata pin both directions: hand-written ones
// for what engines send, generated ones (go test -update) for what
// AppendBatch writes.
package kvevents
