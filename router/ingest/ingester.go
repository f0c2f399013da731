package ingest

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// BlockIndex is where ingest records which blocks a worker holds: the
// router's Index, or a fake in tests.
type BlockIndex interface {
	Store(w router.WorkerID, tier kvtier.Tier, hashes []tokenizer.SeqHash) // blocks now held (a chain, parent first)
	Remove(w router.WorkerID, tier kvtier.Tier, hashes []tokenizer.SeqHash)
	ClearWorker(w router.WorkerID) // drop everything the worker holds
	// ClearWorkerTier drops what the worker holds in one tier.
	ClearWorkerTier(w router.WorkerID, tier kvtier.Tier)
}

var (
	_ BlockIndex            = (*router.Index)(nil)
	_ router.EngineBlockMap = (*Ingester)(nil)
)

// ReplaySource fetches the batches an engine still holds in its replay
// buffer, those with a sequence number ≥ from, oldest first, calling fn for
// each. Batches handed to fn before an error were delivered. A payload
// is valid only during its call of fn.
type ReplaySource interface {
	Replay(ctx context.Context, from uint64, fn func(seq uint64, payload []byte)) error
}

// Stats counts what an Ingester has seen. All counters only grow,
// except MappedBlocks and MappingBytes, which are gauges.
type Stats struct {
	WorkerID router.WorkerID

	Batches       uint64 // batches applied (live and replayed)
	Events        uint64 // events applied
	BlocksStored  uint64 // blocks handed to the index as stored
	BlocksRemoved uint64 // blocks handed to the index as removed
	Malformed     uint64 // messages or batches that could not be decoded, skipped
	Skipped       uint64 // well-formed events ingest cannot use (unknown medium or class, other KV group, other block size, LoRA by id only)
	External      uint64 // events about SGLang's EXTERNAL pool, which no tier of the index stands for
	Orphans       uint64 // stored blocks whose parent or engine hash was unknown: events were missed
	UnknownRemove uint64 // removed blocks that were not known in that tier
	Duplicates    uint64 // batches seen again (live after replay, or replayed twice), ignored
	Gaps          uint64 // sequence gaps on the live stream
	Restarts      uint64 // engine restarts detected (sequence went back, or the replay buffer belongs to another process)
	Replays       uint64 // replay requests made
	ReplayBatches uint64 // batches received by replay
	ReplayErrors  uint64 // replay requests that failed
	ViewResets    uint64 // times the worker's blocks were dropped because events were lost for good

	MappedBlocks int // engine block hashes currently mapped
	MappingBytes int // memory of the engine-hash mapping
}

// ingestCounters is Stats behind atomics, so that Stats may be read
// from another goroutine while the ingest loop runs.
type ingestCounters struct {
	batches, events, blocksStored, blocksRemoved, malformed, skipped, external, orphans,
	unknownRemove, duplicates, gaps, restarts, replays, replayBatches,
	replayErrors, viewResets atomic.Uint64
	mappedBlocks, mappingBytes atomic.Int64
}

// IngesterConfig configures an Ingester.
type IngesterConfig struct {
	// WorkerID is the worker whose events this ingester applies.
	WorkerID router.WorkerID
	// EventFormat is the engine's payload layout, which decides how
	// positional events are read (kvevents.Decoder.Format); the zero value
	// is vLLM's.
	EventFormat kvevents.Format
	// Logger receives gaps, restarts and resets (default slog.Default()).
	Logger *slog.Logger
	// OnDiskStored, when set, is told the engine hashes of every
	// BlockStored event of the disk tier, as they are applied: the blocks
	// the engine wrote to the node's store (kvbm.NodeStore.Written). It is
	// called on the ingest loop with the ingester's lock held and must
	// neither keep the slice nor call back into the router.
	OnDiskStored func(engineHashes []uint64)
}

// Ingester applies one worker's KV events to the block index. It keeps the
// worker's engine-hash mapping and the sequence position of its event
// stream, detects lost batches and engine restarts, and recovers through a
// replay source when it has one. It does no I/O of its own, so all of its
// logic runs in tests without sockets. It is not safe for concurrent use,
// except for Stats and DropEngineBlocks.
type Ingester struct {
	worker router.WorkerID
	index  BlockIndex
	replay ReplaySource // nil: no replay endpoint
	log    *slog.Logger
	onDisk func([]uint64)

	dec   kvevents.Decoder
	batch kvevents.Batch
	// mu guards table and scratch, which DropEngineBlocks uses from
	// another goroutine than the ingest loop's. It is taken once per batch.
	mu      sync.Mutex
	table   ehTable
	scratch []tokenizer.SeqHash

	// groupKinds remembers, by KV-cache group, whether its blocks are a
	// prompt's prefix, as the engine's stored events named its kind.
	groupKinds map[int64]bool

	// Hashers by LoRA name, so that an event does not hash its adapter's
	// name again. Bounded: cleared when it reaches kvMaxHashers names.
	hashers map[string]tokenizer.Hasher

	// synced is true when next and lastTS describe the event stream of the
	// engine process whose blocks the index holds for this worker.
	synced bool
	next   uint64  // sequence number of the next batch to apply
	lastTS float64 // ts of batch next-1, to tell the same process from a restarted one

	// The live stream of one connection only moves forward; a step back
	// means a new engine process.
	haveLive bool
	lastLive uint64
	// checkFirstLive: reconnected without a replay to verify the engine by;
	// the first live batch tells whether it restarted.
	checkFirstLive bool

	stats ingestCounters
}

// NewIngester returns an Ingester that writes cfg.Worker's blocks into index
// and, when replay is not nil, recovers lost batches through it.
func NewIngester(cfg IngesterConfig, index BlockIndex, replay ReplaySource) *Ingester {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	in := &Ingester{
		worker:  cfg.WorkerID,
		index:   index,
		replay:  replay,
		log:     cfg.Logger.With("worker", cfg.WorkerID),
		onDisk:  cfg.OnDiskStored,
		hashers: map[string]tokenizer.Hasher{},
	}
	in.dec.Format = cfg.EventFormat
	return in
}

// Stats returns a snapshot of the counters.
func (in *Ingester) Stats() Stats {
	c := &in.stats
	return Stats{
		WorkerID:      in.worker,
		Batches:       c.batches.Load(),
		Events:        c.events.Load(),
		BlocksStored:  c.blocksStored.Load(),
		BlocksRemoved: c.blocksRemoved.Load(),
		Malformed:     c.malformed.Load(),
		Skipped:       c.skipped.Load(),
		External:      c.external.Load(),
		Orphans:       c.orphans.Load(),
		UnknownRemove: c.unknownRemove.Load(),
		Duplicates:    c.duplicates.Load(),
		Gaps:          c.gaps.Load(),
		Restarts:      c.restarts.Load(),
		Replays:       c.replays.Load(),
		ReplayBatches: c.replayBatches.Load(),
		ReplayErrors:  c.replayErrors.Load(),
		ViewResets:    c.viewResets.Load(),
		MappedBlocks:  int(c.mappedBlocks.Load()),
		MappingBytes:  int(c.mappingBytes.Load()),
	}
}

// Sync brings the worker's view up to date after (re)connecting to the
// engine's event stream: it replays the engine's buffer so that blocks
// cached before the subscription are known. When the view already follows
// an engine process, it first checks through the replay that the engine is
// still that process (same sequence number, same batch timestamp) and then
// only replays what was missed; otherwise it drops the view and replays from
// the start. Sync returns an error only when ctx ends.
func (in *Ingester) Sync(ctx context.Context) error {
	in.haveLive = false
	if in.replay == nil {
		// Nothing to verify the engine by; the first live batch will.
		in.checkFirstLive = in.synced
		return nil
	}
	if in.synced && in.next > 0 {
		same, err := in.replayVerified(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			in.checkFirstLive = true
			return nil
		}
		if same {
			return nil
		}
		in.stats.restarts.Add(1)
		in.resetView("engine restarted while disconnected")
	}
	if err := in.replayFrom(ctx, 0); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		in.checkFirstLive = in.synced
	}
	return nil
}

// HandleLive applies one batch from the live stream. It recovers from
// gaps and restarts as it detects them and returns an error only when ctx
// ends during a replay. It keeps nothing of payload: the caller may reuse
// it once HandleLive returns.
func (in *Ingester) HandleLive(ctx context.Context, seq uint64, payload []byte) error {
	restarted := false
	switch {
	case in.haveLive && seq <= in.lastLive:
		restarted = true
		in.log.Warn("kv events: sequence went back, engine restarted", "seq", seq, "last", in.lastLive)
	case in.checkFirstLive && in.synced && seq < in.next:
		restarted = true
		in.log.Warn("kv events: first batch after reconnect is older than the view, engine restarted", "seq", seq, "next", in.next)
	}
	in.checkFirstLive = false
	in.haveLive, in.lastLive = true, seq
	if restarted {
		in.stats.restarts.Add(1)
		in.resetView("engine restarted")
		if in.replay != nil {
			if err := in.replayFrom(ctx, 0); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}

	if !in.synced {
		// No replay could tell what came before: start from here. Blocks
		// stored earlier stay unknown until the engine stores them again.
		in.synced, in.next = true, seq
	}
	if seq < in.next {
		in.stats.duplicates.Add(1) // already applied through a replay
		return nil
	}
	if seq > in.next {
		in.stats.gaps.Add(1)
		in.log.Info("kv events: sequence gap", "expected", in.next, "got", seq)
		if in.replay != nil {
			if err := in.replayFrom(ctx, in.next); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if seq < in.next {
			in.stats.duplicates.Add(1) // the replay covered it
			return nil
		}
		if seq > in.next {
			in.resetView("lost batches could not be replayed")
			in.synced, in.next = true, seq
		}
	}
	in.apply(seq, payload)
	return nil
}

// replayVerified replays from next-1 and reports whether the first batch
// is the one the view last applied. If it is, the batches after it are
// applied as they arrive.
func (in *Ingester) replayVerified(ctx context.Context) (same bool, err error) {
	from := in.next - 1
	first, mismatch := true, false
	in.stats.replays.Add(1)
	err = in.replay.Replay(ctx, from, func(seq uint64, payload []byte) {
		in.stats.replayBatches.Add(1)
		if mismatch {
			return
		}
		if first {
			first = false
			same = seq == from && in.dec.Decode(payload, &in.batch) == nil && in.batch.TS == in.lastTS
			mismatch = !same
			return
		}
		in.applyReplayed(seq, payload)
	})
	if err != nil {
		in.stats.replayErrors.Add(1)
		in.log.Warn("kv events: replay failed", "from", from, "error", err)
		return false, err
	}
	if first {
		in.log.Info("kv events: replay buffer is empty, engine restarted", "from", from)
	} else if mismatch {
		in.log.Info("kv events: replay buffer belongs to another engine process", "from", from)
	}
	return same, nil
}

// replayFrom replays from seq from and applies what the view lacks.
func (in *Ingester) replayFrom(ctx context.Context, from uint64) error {
	in.stats.replays.Add(1)
	startNext, wasSynced := in.next, in.synced
	err := in.replay.Replay(ctx, from, func(seq uint64, payload []byte) {
		in.stats.replayBatches.Add(1)
		in.applyReplayed(seq, payload)
	})
	if err != nil {
		in.stats.replayErrors.Add(1)
		in.log.Warn("kv events: replay failed", "from", from, "error", err)
		return err
	}
	if !in.synced && from == 0 {
		// An empty buffer means the engine has published nothing yet: the
		// first batch it publishes is the first the view needs.
		in.synced, in.next, in.lastTS = true, 0, math.NaN()
	}
	in.log.Debug("kv events: replayed", "from", from, "synced", in.synced, "batches", in.next-startNext, "was_synced", wasSynced)
	return nil
}

// applyReplayed applies one replayed batch if the view lacks it.
func (in *Ingester) applyReplayed(seq uint64, payload []byte) {
	if !in.synced {
		if seq > 0 {
			in.log.Info("kv events: replay buffer starts after the engine's first batch; earlier blocks stay unknown until stored again", "first", seq)
		}
		in.synced, in.next = true, seq
	}
	if seq < in.next {
		in.stats.duplicates.Add(1)
		return
	}
	if seq > in.next {
		in.resetView("replay buffer no longer holds the lost batches")
		in.synced, in.next = true, seq
	}
	in.apply(seq, payload)
}

// resetView drops everything known about the worker: its blocks in the
// index and the engine-hash mapping. The view rebuilds from later events.
func (in *Ingester) resetView(reason string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stats.viewResets.Add(1)
	in.log.Warn("kv events: dropping the worker's cached blocks", "reason", reason, "mapped", in.table.len())
	in.index.ClearWorker(in.worker)
	in.table.reset()
	in.synced, in.next, in.lastTS = false, 0, math.NaN()
	in.updateGauges()
}

// apply decodes and applies batch seq, which is the next one the view
// needs. A malformed batch still counts as seen: skipping it loses at most
// its own events.
func (in *Ingester) apply(seq uint64, payload []byte) {
	in.next = seq + 1
	if err := in.dec.Decode(payload, &in.batch); err != nil {
		in.stats.malformed.Add(1)
		in.lastTS = math.NaN()
		in.log.Debug("kv events: skipping malformed batch", "seq", seq, "error", err)
		return
	}
	in.lastTS = in.batch.TS
	in.applyBatch(&in.batch)
	in.releaseLargeBatch()
}

// maxKeptBatchBytes bounds the decode buffers an Ingester keeps from one
// batch to the next. Decode reuses every event's buffers, so without a
// bound each event slot would keep the largest token list it ever held:
// over hours of long prompts, megabytes per engine that nothing reads.
const maxKeptBatchBytes = 256 << 10

// releaseLargeBatch lets the decoded batch's buffers go when they hold
// more than maxKeptBatchBytes; the usual small batch keeps them for reuse.
func (in *Ingester) releaseLargeBatch() {
	if batchBufferBytes(&in.batch) > maxKeptBatchBytes {
		in.batch = kvevents.Batch{}
	}
}

// batchBufferBytes is what b's event buffers hold, those of the slots
// past its length included.
func batchBufferBytes(b *kvevents.Batch) int {
	n := 0
	for _, ev := range b.Events[:cap(b.Events)] {
		n += 8*cap(ev.BlockHashes) + 4*cap(ev.TokenIDs)
		for _, k := range ev.ExtraKeys[:cap(ev.ExtraKeys)] {
			n += cap(k)
		}
	}
	return n
}

// applyBatch applies a decoded batch to the index and the mapping.
func (in *Ingester) applyBatch(b *kvevents.Batch) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stats.batches.Add(1)
	for i := range b.Events {
		in.applyEvent(&b.Events[i])
	}
	in.updateGauges()
}

func (in *Ingester) updateGauges() {
	in.stats.mappedBlocks.Store(int64(in.table.len()))
	in.stats.mappingBytes.Store(int64(in.table.bytes()))
}

func (in *Ingester) applyEvent(ev *kvevents.Event) {
	switch ev.Kind {
	case kvevents.BlockStored:
		in.applyStored(ev)
	case kvevents.BlockRemoved:
		in.applyRemoved(ev)
	case kvevents.AllBlocksCleared:
		// vLLM's GPU block pool sends it (vllm/v1/core/block_pool.py,
		// reset_prefix_cache, also on a sleep): the GPU cache is gone, the
		// blocks offloaded below it are not.
		in.stats.events.Add(1)
		tier, ok := kvtier.Of(ev.Medium)
		if !ok {
			tier = kvtier.GPU
		}
		in.index.ClearWorkerTier(in.worker, tier)
		in.table.reset()
	default:
		in.stats.skipped.Add(1)
	}
}

// usable reports whether an event is about blocks the index tracks, and in
// which tier. Hybrid models report each KV-cache group separately, and only
// the full-attention layers' blocks decide prefix reuse: an event that
// names its group's kind (vLLM's kv_cache_spec_kind, SGLang's component
// type) is kept by that kind, whatever its group; one that does not is
// kept in group 0, where vLLM puts full attention when it has any, unless
// a stored event named that group's kind before: vLLM's removals carry the
// group alone.
func (in *Ingester) usable(ev *kvevents.Event) (kvtier.Tier, bool) {
	if ev.Medium == kvevents.MediumExternal {
		// A pool outside the node (SGLang's EXTERNAL, e.g. Mooncake): the
		// engine loads from it, Hearth cannot, so its blocks predict no
		// hit Hearth could place. Counted apart so that a deployment with
		// one shows it.
		in.stats.external.Add(1)
		return 0, false
	}
	tier, ok := kvtier.Of(ev.Medium)
	if !ok || !kvevents.FullAttentionComponent(ev.ComponentType) || !in.prefixGroup(ev) {
		in.stats.skipped.Add(1)
		return 0, false
	}
	return tier, true
}

// prefixGroup reports whether the event's KV-cache group holds blocks whose
// hashes are a prompt's prefix, by the kind it names
// (kvevents.PrefixSpecKind). A group's kind, once named, is remembered for
// the events that do not name it (vLLM's BlockRemoved).
func (in *Ingester) prefixGroup(ev *kvevents.Event) bool {
	if len(ev.SpecKind) == 0 {
		if prefix, named := in.groupKinds[ev.GroupIdx]; named {
			return prefix
		}
		return ev.GroupIdx == 0
	}
	prefix := kvevents.PrefixSpecKind(ev.SpecKind)
	if _, named := in.groupKinds[ev.GroupIdx]; !named && len(in.groupKinds) < maxKVGroups {
		if in.groupKinds == nil {
			in.groupKinds = map[int64]bool{}
		}
		in.groupKinds[ev.GroupIdx] = prefix
	}
	return prefix
}

// maxKVGroups bounds the groups whose kind an ingester remembers: a model
// has a handful.
const maxKVGroups = 64

func (in *Ingester) applyStored(ev *kvevents.Event) {
	tier, ok := in.usable(ev)
	if !ok {
		return
	}
	if tier == kvtier.Disk && in.onDisk != nil && len(ev.BlockHashes) > 0 {
		in.onDisk(ev.BlockHashes)
	}
	bit := uint8(1) << tier
	seqs := in.scratch[:0]
	defer func() { in.scratch = seqs[:0] }()

	if len(ev.TokenIDs) == 0 {
		// Offloaded copies of blocks stored earlier: known only by their
		// engine hashes. vLLM's offloading connector names them by their
		// raw hashes, which kvevents keys as the GPU events' ints. An
		// offloaded block of several GPU blocks (the connector's
		// block_size option, which Hearth does not set) is named by its
		// last GPU block only, so only that one would be found here.
		for _, h := range ev.BlockHashes {
			if s, ok := in.table.addTier(h, bit); ok {
				seqs = append(seqs, tokenizer.SeqHash(s))
			} else {
				in.stats.orphans.Add(1)
			}
		}
		in.store(tier, seqs)
		return
	}

	bs := ev.BlockSize
	if bs == 0 && len(ev.BlockHashes) > 0 {
		bs = len(ev.TokenIDs) / len(ev.BlockHashes)
	}
	if bs != tokenizer.DefaultBlockSize || ev.HasLoRAID && len(ev.LoRAName) == 0 {
		// Blocks of another size than the one every engine is started
		// with never match a request's hashes, and an
		// adapter named only by id cannot be hashed like the requests for
		// it. Skipping under-reports the cache, which costs a hit at worst.
		in.stats.skipped.Add(1)
		return
	}
	if len(ev.TokenIDs) != len(ev.BlockHashes)*bs || len(ev.ExtraKeys) > 0 && len(ev.ExtraKeys) != len(ev.BlockHashes) {
		in.stats.malformed.Add(1)
		in.log.Debug("kv events: BlockStored tokens or extra keys do not match its blocks",
			"tokens", len(ev.TokenIDs), "extra_keys", len(ev.ExtraKeys), "blocks", len(ev.BlockHashes), "block_size", bs)
		return
	}

	var parent tokenizer.SeqHash
	if ev.HasParent {
		s, ok := in.table.get(ev.ParentBlockHash)
		if !ok {
			// The parent's BlockStored was missed, so these blocks' prefix
			// is unknown and so are their sequence hashes.
			in.stats.orphans.Add(uint64(len(ev.BlockHashes)))
			return
		}
		parent = tokenizer.SeqHash(s)
	}
	h := in.hasherFor(ev.LoRAName)
	for i, eh := range ev.BlockHashes {
		local := h.LocalHash(ev.TokenIDs[i*bs : (i+1)*bs])
		first := i == 0 && !ev.HasParent
		if len(ev.ExtraKeys) > 0 {
			local = mixExtraKeys(local, ev.ExtraKeys[i], ev.LoRAName, first)
		}
		var s tokenizer.SeqHash
		if first {
			// A salt is mixed into a sequence's first block only, as the
			// router hashes a salted prompt (tokenizer.Hasher.WithSalt);
			// the chain carries it to the blocks after, whose SGLang
			// events repeat it.
			s = tokenizer.SeqHash(tokenizer.MixSalt(local, ev.CacheSalt))
		} else {
			s = tokenizer.Chain(parent, local)
		}
		parent = s
		in.table.put(eh, uint64(s), bit)
		seqs = append(seqs, s)
	}
	in.store(tier, seqs)
}

func (in *Ingester) store(tier kvtier.Tier, seqs []tokenizer.SeqHash) {
	in.stats.events.Add(1)
	if len(seqs) == 0 {
		return
	}
	in.index.Store(in.worker, tier, seqs)
	in.stats.blocksStored.Add(uint64(len(seqs)))
}

func (in *Ingester) applyRemoved(ev *kvevents.Event) {
	tier, ok := in.usable(ev)
	if !ok {
		return
	}
	in.stats.events.Add(1)
	bit := uint8(1) << tier
	seqs := in.scratch[:0]
	for _, h := range ev.BlockHashes {
		if s, ok := in.table.dropTier(h, bit); ok {
			seqs = append(seqs, tokenizer.SeqHash(s))
		} else {
			in.stats.unknownRemove.Add(1)
		}
	}
	if len(seqs) > 0 {
		in.index.Remove(in.worker, tier, seqs)
		in.stats.blocksRemoved.Add(uint64(len(seqs)))
	}
	in.scratch = seqs[:0]
}

// DropEngineBlocks records that tier no longer holds the blocks the
// worker's engine names engineHashes, as a BlockRemoved event would, and
// sets known[i] when the worker's mapping knew engineHashes[i] in that
// tier (known nil: not recorded). It is for a removal the engine does not
// report: a node's disk store evicting blocks it knows only by engine hash
// (Router.RemoveNodeBlocks). Hashes the mapping does not know are not
// counted as unknown removals (another worker of the node may have written
// them). Safe to call while the ingest loop runs.
func (in *Ingester) DropEngineBlocks(tier kvtier.Tier, engineHashes []uint64, known []bool) {
	if tier >= kvtier.Count {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	bit := uint8(1) << tier
	seqs := in.scratch[:0]
	for i, h := range engineHashes {
		if s, ok := in.table.dropTier(h, bit); ok {
			seqs = append(seqs, tokenizer.SeqHash(s))
			if known != nil {
				known[i] = true
			}
		}
	}
	if n := len(seqs); n > 0 {
		in.index.Remove(in.worker, tier, seqs)
		in.stats.blocksRemoved.Add(uint64(n))
	}
	in.scratch = seqs[:0]
	in.updateGauges()
}

const kvMaxHashers = 256

func (in *Ingester) hasherFor(name []byte) tokenizer.Hasher {
	if h, ok := in.hashers[string(name)]; ok {
		return h
	}
	if len(in.hashers) >= kvMaxHashers {
		clear(in.hashers)
	}
	h := tokenizer.NewHasher(string(name))
	in.hashers[string(name)] = h
	return h
}

// mixExtraKeys folds a block's extra keys (raw msgpack) into its local hash.
// vLLM lists, per block, what besides the tokens its own hash covered, in
// this order (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys,
// v0.20.0): the LoRA name, multimodal input hashes, the cache salt (first
// block only), prompt-embedding hashes. The LoRA name alone is already in
// the hasher's seed and changes nothing; a sequence's first block whose keys
// are its LoRA name and one more string holds a cache salt, mixed in as the
// router mixes a request's (tokenizer.MixSalt). Blocks whose KV depends on
// anything else (images, prompt embeddings) must not match a text request
// with the same (placeholder) tokens, so they get a hash no request
// produces.
func mixExtraKeys(local uint64, raw, loraName []byte, first bool) uint64 {
	strs, ok := extraKeyStrings(raw)
	if ok && len(strs) > 0 && len(loraName) > 0 && string(strs[0]) == string(loraName) {
		strs = strs[1:]
	}
	switch {
	case ok && len(strs) == 0:
		return local
	case ok && len(strs) == 1 && first:
		return tokenizer.MixSalt(local, strs[0])
	}
	return local ^ xxh3.HashSeed(raw, 0x6b76_6578_7472_61) // "kvextra"
}

// extraKeyStrings reads one block's extra keys when they are nil or an
// array of strings (at most 4), in place; ok is false for anything else.
func extraKeyStrings(raw []byte) (strs [][]byte, ok bool) {
	if len(raw) == 0 || raw[0] == 0xc0 {
		return nil, true
	}
	if raw[0] < 0x90 || raw[0] > 0x94 {
		return nil, false
	}
	n, s := int(raw[0]&0x0f), raw[1:]
	for range n {
		if len(s) == 0 {
			return nil, false
		}
		var l int
		switch c := s[0]; {
		case c >= 0xa0 && c <= 0xbf:
			l, s = int(c&0x1f), s[1:]
		case c == 0xd9 && len(s) >= 2:
			l, s = int(s[1]), s[2:]
		case c == 0xda && len(s) >= 3:
			l, s = int(s[1])<<8|int(s[2]), s[3:]
		default:
			return nil, false
		}
		if l > len(s) {
			return nil, false
		}
		strs, s = append(strs, s[:l]), s[l:]
	}
	return strs, len(s) == 0
}

// SeqHashOf is the sequence hash of the block the worker's engine names
// engineHash, in any tier (router.EngineBlockMap): how the node store's
// eviction, which knows blocks by engine hash, asks the router about the
// requests that used one (Router.NodeBlockPriority). Safe to call while
// the ingest loop runs.
func (in *Ingester) SeqHashOf(engineHash uint64) (tokenizer.SeqHash, bool) {
	in.mu.Lock()
	s, ok := in.table.get(engineHash)
	in.mu.Unlock()
	return tokenizer.SeqHash(s), ok
}
