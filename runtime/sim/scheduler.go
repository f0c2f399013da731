package sim

import (
	"crypto/sha256"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The scheduler follows vLLM V1's: one token budget per step shared by all
// requests, no separate prefill and decode phases.
//
//  1. Running requests first, in the order they were scheduled: each gets
//     the tokens it still needs (1 for a decode, the rest of its prompt for a
//     chunked prefill) up to the remaining budget. If its new tokens need a
//     block and none is free, the lowest-priority running request is
//     preempted (fcfs: the one scheduled last; priority: the largest
//     (priority, arrival)), which may be the request itself. Preemption is
//     vLLM's recompute mode: the victim's blocks are freed (they stay in the
//     prefix cache until evicted) and it returns to the waiting queue, to
//     recompute its prompt and the tokens it generated so far.
//  2. Then, only if nothing was preempted, waiting requests in queue order
//     while budget, max_num_seqs and free blocks last: each looks up its
//     prefix in the cache, and its remaining tokens are scheduled up to the
//     budget (chunked prefill). The first request that does not fit stops the
//     loop, as in vLLM.
//
// The waiting queue orders by arrival (fcfs) or by (priority, arrival)
// (priority, lower values first). vLLM's fcfs queue puts a preempted request
// at its front; here it goes back at its arrival position, which is the front
// or close to it.

// Step runs one scheduler step starting at now and returns how long it takes
// and the tokens it produced. KV events of the step are published to the sink
// with timestamp now+Duration. Calling Step without work returns a zero
// result.
func (c *Core) Step(now time.Duration) StepResult {
	if len(c.events) > 0 {
		c.publish(now) // held by a Runner that did not flush
	}
	c.outputs = c.outputs[:0]
	c.scheduled = c.scheduled[:0]
	c.pool.arena = c.pool.arena[:0]
	if !c.HasWork() {
		return StepResult{}
	}
	budget := c.cfg.MaxNumBatchedTokens
	preempted := 0

	for i := 0; i < len(c.running) && budget > 0; {
		r := c.running[i]
		n := min(r.numTokens()-r.numComputed, budget)
		if n <= 0 {
			i++
			continue
		}
		selfPreempted := false
		for !c.allocateSlots(r, n, nil, 0) {
			v := c.victim()
			victim := c.running[v]
			if victim.scheduled > 0 {
				budget += victim.scheduled
				victim.scheduled = 0
			}
			c.preempt(v)
			preempted++
			if victim == r {
				selfPreempted = true
				break
			}
			if v < i {
				i--
			}
		}
		if selfPreempted {
			continue // c.running[i] is now the next request
		}
		r.scheduled = n
		budget -= n
		c.scheduled = append(c.scheduled, r)
		i++
	}

	loadedBlocks, storeBlocks := 0, 0
	if preempted == 0 {
		for c.waiting.len() > 0 && budget > 0 && len(c.running) < c.cfg.MaxNumSeqs {
			r := c.waiting.peek()
			hits, fromRAM, fromDisk := c.findHits(r)
			loaded := fromRAM + fromDisk
			computed := (len(hits) + loaded) * c.cfg.BlockSize
			n := min(r.numTokens()-computed, budget)
			if !c.allocateSlots(r, n, hits, loaded) {
				break
			}
			c.waiting.pop()
			r.running = true
			c.running = append(c.running, r)
			if loaded > 0 {
				// Loaded blocks are in host RAM already; offloading
				// resumes after them, as vLLM's connector does.
				r.numOffered = len(hits) + loaded
				loadedBlocks += fromRAM
				storeBlocks += fromDisk
				c.stats.CPULoadedBlocks += int64(fromRAM)
				c.stats.DiskLoadedBlocks += int64(fromDisk)
			}
			if r.cachedTokens < 0 {
				// vLLM's prefix-cache counters count a request when it is
				// first admitted; re-admissions after preemption go to
				// separate counters that the metrics do not export. The
				// GPU counters count GPU hits only; tokens loaded from
				// host RAM go to the connector's external counters.
				r.cachedTokens = computed
				r.hostCachedTokens = fromRAM * c.cfg.BlockSize
				r.storeCachedTokens = fromDisk * c.cfg.BlockSize
				r.queueTime = now - r.addedAt
				c.stats.PrefixQueries += int64(r.numTokens())
				c.stats.PrefixHits += int64(len(hits) * c.cfg.BlockSize)
				if c.cpu != nil || c.store != nil {
					// The connector is asked about what the GPU missed.
					c.stats.ExternalPrefixQueries += int64(r.numTokens() - len(hits)*c.cfg.BlockSize)
					c.stats.ExternalPrefixHits += int64(loaded * c.cfg.BlockSize)
				}
			}
			r.scheduled = n
			budget -= n
			c.scheduled = append(c.scheduled, r)
		}
	}

	if c.cpu != nil || c.store != nil {
		c.offload()
	}

	var load catalog.StepLoad
	for _, r := range c.scheduled {
		if r.scheduled > 0 {
			load.Add(r.numComputed, r.scheduled)
		}
	}
	dur := c.timing.StepDuration(&load)
	if loadedBlocks > 0 {
		// vLLM loads asynchronously and runs the batch meanwhile; charging
		// the PCIe time to the step delays the whole batch, which
		// overstates the cost of a load for the other requests.
		dur += time.Duration(float64(loadedBlocks) * c.loadSecondsPerBlock * float64(time.Second))
	}
	if storeBlocks > 0 {
		dur += time.Duration(float64(storeBlocks) * c.storeSecondsPerBlock * float64(time.Second))
	}
	if dur == 0 {
		// Work exists but nothing fit (only reachable if every running
		// request preempted itself); charge the fixed cost so that a caller
		// looping on HasWork still advances its clock.
		dur = catalog.StepOverhead
	}
	end := now + dur

	finished := 0
	for _, r := range c.scheduled {
		if r.scheduled == 0 {
			continue
		}
		r.numComputed += r.scheduled
		r.scheduled = 0
		if r.numComputed < r.numTokens() {
			continue // a prefill chunk: no token yet
		}
		idx := r.numOutput
		r.numOutput++
		c.stats.GenerationTokens++
		if idx == 0 {
			c.stats.PromptTokens += int64(r.promptLen)
		}
		out := TokenOutput{
			RequestID:         r.id,
			Token:             r.tokens[r.promptLen+idx],
			Index:             idx,
			CachedTokens:      r.cachedTokens,
			HostCachedTokens:  r.hostCachedTokens,
			StoreCachedTokens: r.storeCachedTokens,
			PromptTokens:      r.promptLen,
			QueueTime:         r.queueTime,
		}
		if r.numOutput == r.outputLen {
			out.Finished = true
			out.FinishReason = "length"
			if r.stop {
				out.FinishReason = "stop"
			}
			c.freeBlocks(r)
			r.running = false
			delete(c.byID, r.id)
			finished++
		}
		c.outputs = append(c.outputs, out)
	}
	if finished > 0 {
		kept := c.running[:0]
		for _, r := range c.running {
			if r.running {
				kept = append(kept, r)
			}
		}
		clear(c.running[len(kept):])
		c.running = kept
	}
	c.stats.Preemptions += int64(preempted)
	if !c.holdEvents {
		c.publish(end)
	}
	return StepResult{
		Duration:     dur,
		Outputs:      c.outputs,
		NumScheduled: load.Seqs(),
		NumTokens:    load.Tokens(),
		Preempted:    preempted,
	}
}

// findHits returns the cached blocks of r's longest cached prefix, in the
// core's scratch slice, how many blocks after them the host-RAM tier holds
// (0 when it is off), and how many after those the node store holds and
// were read from it (0 when it is off). At most (numTokens-1)/BlockSize
// blocks count in all: vLLM must compute at least one token to produce
// logits, so a fully cached prompt recomputes its last block.
func (c *Core) findHits(r *request) (hits []int32, fromRAM, fromDisk int) {
	hits = c.hits[:0]
	bs := c.cfg.BlockSize
	maxBlocks := (r.numTokens() - 1) / bs
	for i := 0; i < maxBlocks; i++ {
		id, ok := c.pool.lookup(c.blockHash(r, i))
		if !ok {
			break
		}
		hits = append(hits, id)
	}
	c.hits = hits
	if c.cpu != nil {
		// The connector's lookup touches all of the request's full blocks
		// first, then continues the match where the GPU's stopped.
		if full := r.numTokens() / bs; full > 0 {
			c.blockHash(r, full-1)
			c.cpu.touch(r.hashes[:full])
		}
		for i := len(hits); i < maxBlocks && c.cpu.has(c.blockHash(r, i)); i++ {
			fromRAM++
		}
	}
	if c.store != nil {
		fromDisk = c.loadFromStore(r, len(hits)+fromRAM, maxBlocks)
	}
	return hits, fromRAM, fromDisk
}

// offload offers the full blocks each scheduled request computes in this
// step to the host-RAM tier (write-through, as vLLM's connector stores
// after every step), then touches the request's blocks there, and writes
// them through to the node store.
func (c *Core) offload() {
	bs := c.cfg.BlockSize
	for _, r := range c.scheduled {
		if r.scheduled == 0 {
			continue // preempted after it was scheduled
		}
		full := min(r.numComputed+r.scheduled, r.numTokens()) / bs
		if c.store != nil {
			c.writeThrough(r, full)
		}
		if c.cpu == nil || full <= r.numOffered {
			continue
		}
		stored, ok := c.cpu.store(r.hashes[r.numOffered:full])
		if !ok {
			continue // more new blocks than the whole tier: retried next step
		}
		c.stats.CPUStoredBlocks += int64(stored)
		r.numOffered = full
		if stored > 0 {
			c.cpu.touch(r.hashes[:full])
		}
	}
}

// blockHash returns the chained hash of r's i-th block, computing the hashes
// up to it on first use. The block must be full.
func (c *Core) blockHash(r *request, i int) uint64 {
	bs := c.cfg.BlockSize
	for len(r.hashes) <= i {
		j := len(r.hashes)
		page := r.tokens[j*bs : (j+1)*bs]
		if c.cfg.Kind == hruntime.KindSGLang {
			var prior *[sha256.Size]byte
			if j > 0 {
				prior = &r.digests[j-1]
			} else if r.salt != nil {
				ns := sglangSaltDigest(r.salt)
				prior = &ns
			}
			var d [sha256.Size]byte
			d, c.hashBuf = sglangPageDigest(prior, page, c.hashBuf)
			r.digests = append(r.digests, d)
			r.hashes = append(r.hashes, sglangBlockID(&d))
			continue
		}
		parent := c.root
		if j > 0 {
			parent = r.hashes[j-1]
		} else if r.salt != nil {
			// vLLM hashes a salt with the first block's extra keys.
			parent = chainSalt(parent, r.salt)
		}
		r.hashes = append(r.hashes, chainHash(parent, page))
	}
	return r.hashes[i]
}

// allocateSlots gives r the blocks for n more tokens after its computed ones
// (after the hits, for a request coming from the waiting queue), and offers
// the blocks these tokens fill to the prefix cache. It reports false, changing
// nothing, when there are not enough free blocks.
//
// loaded blocks follow the hits: they come from the host-RAM tier, so they
// get new GPU blocks and count as computed.
func (c *Core) allocateSlots(r *request, n int, hits []int32, loaded int) bool {
	bs := c.cfg.BlockSize
	computed := r.numComputed
	if len(hits)+loaded > 0 {
		computed = (len(hits) + loaded) * bs
	}
	total := computed + n
	need := (total+bs-1)/bs - len(r.blocks) - len(hits)
	freeHits := 0
	for _, id := range hits {
		if c.pool.blocks[id].refs == 0 {
			freeHits++ // touching it takes it off the free queue
		}
	}
	if need > c.pool.numFree-freeHits {
		return false
	}
	for _, id := range hits {
		c.pool.touch(id)
	}
	if len(hits)+loaded > 0 {
		r.blocks = append(r.blocks, hits...)
		r.numComputed = computed
		r.numStored = len(hits)
	}
	for range need {
		r.blocks = append(r.blocks, c.pool.allocate())
	}
	c.storeFullBlocks(r, total/bs)
	return true
}

// storeFullBlocks offers r's blocks [numStored, full) to the prefix cache and
// emits one BlockStored per run of newly stored blocks (vLLM), or per block
// (SGLang, whose radix cache records one event per page).
func (c *Core) storeFullBlocks(r *request, full int) {
	bs := c.cfg.BlockSize
	perBlock := c.cfg.Kind == hruntime.KindSGLang
	runStart := -1
	flush := func(end int) {
		if runStart < 0 {
			return
		}
		ev := kvevents.Event{
			Kind:        kvevents.BlockStored,
			BlockHashes: r.hashes[runStart:end:end],
			TokenIDs:    r.tokens[runStart*bs : end*bs : end*bs],
			BlockSize:   bs,
			Medium:      kvevents.MediumGPU,
		}
		if runStart > 0 {
			ev.ParentBlockHash, ev.HasParent = r.hashes[runStart-1], true
		}
		if r.salt != nil {
			if perBlock {
				ev.CacheSalt = r.salt // SGLang: every page of the request
			} else if runStart == 0 {
				ev.ExtraKeys = vllmSaltExtraKeys(r.salt, end)
			}
		}
		c.events = append(c.events, ev)
		runStart = -1
	}
	for i := r.numStored; i < full; i++ {
		if c.pool.store(r.blocks[i], c.blockHash(r, i)) {
			if perBlock {
				flush(i)
			}
			if runStart < 0 {
				runStart = i
			}
		} else {
			flush(i)
		}
	}
	flush(full)
	r.numStored = max(r.numStored, full)
}

// victim picks the running request to preempt.
func (c *Core) victim() int {
	if c.cfg.SchedulingPolicy != PolicyPriority {
		return len(c.running) - 1
	}
	v := 0
	for i, r := range c.running[1:] {
		w := c.running[v]
		if r.priority > w.priority || (r.priority == w.priority && r.arrival > w.arrival) {
			v = i + 1
		}
	}
	return v
}

// preempt moves c.running[i] back to the waiting queue, freeing its blocks.
func (c *Core) preempt(i int) {
	r := c.running[i]
	c.removeRunning(i)
	c.freeBlocks(r)
	r.running = false
	c.waiting.push(r)
}

// removeRunning deletes c.running[i], keeping the order.
func (c *Core) removeRunning(i int) {
	copy(c.running[i:], c.running[i+1:])
	c.running[len(c.running)-1] = nil
	c.running = c.running[:len(c.running)-1]
}

// freeBlocks releases r's blocks last first, so that the deepest block of a
// chain is evicted before its parents, and resets r to recompute from
// scratch.
func (c *Core) freeBlocks(r *request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		c.pool.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.numComputed = 0
	r.numStored = 0
	r.scheduled = 0
}

// waitLess orders the waiting queue.
func (c *Core) waitLess(a, b *request) bool {
	if c.cfg.SchedulingPolicy == PolicyPriority && a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.arrival < b.arrival
}

// waitQueue is a binary heap of waiting requests.
type waitQueue struct {
	items []*request
	less  func(a, b *request) bool
}

func (q *waitQueue) len() int       { return len(q.items) }
func (q *waitQueue) peek() *request { return q.items[0] }
func (q *waitQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].heapIndex = i
	q.items[j].heapIndex = j
}
func (q *waitQueue) lessAt(i, j int) bool { return q.less(q.items[i], q.items[j]) }

func (q *waitQueue) push(r *request) {
	r.heapIndex = len(q.items)
	q.items = append(q.items, r)
	q.up(r.heapIndex)
}

func (q *waitQueue) pop() *request {
	return q.removeAt(0)
}

func (q *waitQueue) remove(r *request) {
	if r.heapIndex >= 0 && r.heapIndex < len(q.items) && q.items[r.heapIndex] == r {
		q.removeAt(r.heapIndex)
	}
}

func (q *waitQueue) removeAt(i int) *request {
	r := q.items[i]
	last := len(q.items) - 1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = nil
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	r.heapIndex = -1
	return r
}

func (q *waitQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.lessAt(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *waitQueue) down(i int) {
	n := len(q.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.lessAt(r, l) {
			m = r
		}
		if !q.lessAt(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}
