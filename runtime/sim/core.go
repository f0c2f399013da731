package sim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Errors returned by Core.Add (and Runner.Submit) that callers branch on.
var (
	// ErrPromptTooLong: prompt plus output tokens exceed MaxModelLen.
	ErrPromptTooLong = errors.New("sim: prompt plus output exceed max_model_len")
	// ErrDuplicateID: a live request already has this id.
	ErrDuplicateID = errors.New("sim: duplicate request id")
	// ErrEmptyRequest: the request has no prompt or no output tokens.
	ErrEmptyRequest = errors.New("sim: request needs at least one prompt and one output token")
)

// Core is one simulated vLLM engine in virtual time: KV cache, scheduler and
// timing model. It is not safe for concurrent use: one goroutine drives it
// (a Runner in real time, or a discrete-event simulation that calls Step and
// advances its own clock by the returned Duration). Given the same calls it
// produces the same results.
type Core struct {
	cfg    Config
	gpu    catalog.GPU
	model  catalog.Model
	timing catalog.Roofline
	sink   EventSink
	root   uint64

	pool *blockPool
	// cpu is the host-RAM tier, nil when off; loadSecondsPerBlock is the
	// PCIe time of loading one block from it.
	cpu                 *cpuPool
	loadSecondsPerBlock float64
	// store is the node's SSD tier, nil when off; storeSecondsPerBlock is
	// the time of reading one block from it and copying it to the GPU.
	store                NodeStore
	storeSecondsPerBlock float64
	blockBytes           int64
	waiting              waitQueue
	running              []*request
	byID                 map[string]*request
	arrival              uint64

	// Per-step buffers, reused by every Step.
	events    []kvevents.Event
	outputs   []TokenOutput
	scheduled []*request
	hits      []int32
	hashBuf   []byte // SHA-256 input of one SGLang page

	stats Stats

	// holdEvents keeps a step's events until flushEvents instead of
	// publishing them at the end of Step: the Runner publishes them when the
	// step's wall-clock time has passed, as vLLM does after the forward pass.
	holdEvents bool
}

// StepResult is the outcome of one scheduler step.
type StepResult struct {
	// Duration is how long the step takes on the modelled GPU; the step's
	// tokens exist at now+Duration. Zero when there was nothing to do.
	Duration time.Duration
	// Outputs are the tokens produced at the end of the step, at most one
	// per scheduled request. The slice is reused by the next Step: copy what
	// must outlive it.
	Outputs []TokenOutput
	// NumScheduled is the number of requests in the step's batch and
	// NumTokens the tokens computed for them (prefill chunks plus decodes).
	NumScheduled int
	NumTokens    int
	// Preempted counts requests preempted in this step.
	Preempted int
}

// request is the engine's state of one Request.
type request struct {
	id        string
	tokens    []uint32 // prompt followed by output
	promptLen int
	outputLen int
	priority  int
	stop      bool
	salt      []byte // cache_salt; nil for none
	arrival   uint64
	addedAt   time.Duration // engine time of Add
	queueTime time.Duration // addedAt until first scheduled

	numOutput   int // tokens generated so far
	numComputed int // tokens whose KV is in the cache
	blocks      []int32
	hashes      []uint64 // chained hashes of the full blocks known so far
	// digests are the SGLang flavour's full page digests, parallel to
	// hashes: the next page's hash chains on all 32 bytes.
	digests    [][sha256.Size]byte
	numStored  int // leading blocks already offered to the prefix cache
	numOffered int // leading blocks already offered to the host-RAM tier
	numWritten int // leading blocks already written to the node store
	storeRead  int // blocks [0, storeRead) were read from the node store
	// cachedTokens is the prompt tokens found in the prefix cache when the
	// request was first scheduled; -1 before.
	cachedTokens int
	// hostCachedTokens is the part of cachedTokens loaded from host RAM.
	hostCachedTokens int
	// storeCachedTokens is the part of cachedTokens loaded from the node
	// store.
	storeCachedTokens int

	scheduled int // tokens scheduled in the current step
	running   bool
	heapIndex int
}

// numTokens is the tokens known: the prompt and what was generated.
func (r *request) numTokens() int { return r.promptLen + r.numOutput }

// NewCore builds an engine from cfg (defaults applied, see Config). sink, if
// not nil, receives each step's KV events.
func NewCore(cfg Config, sink EventSink) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	gpu, _ := catalog.LookupGPU(cfg.GPU)
	model, _ := catalog.LookupModel(cfg.Model)
	cfg.GPU, cfg.Model = gpu.Kind, model.Name
	perf := cfg.Perf()
	c := &Core{
		cfg:    cfg,
		gpu:    gpu,
		model:  model,
		timing: perf.Roofline(),
		sink:   sink,
		root:   rootHash(cfg.Seed),
		byID:   make(map[string]*request),
	}
	c.pool = newBlockPool(cfg.NumGPUBlocks, cfg.BlockSize, &c.events)
	if cfg.NumCPUBlocks > 0 {
		c.cpu = newCPUPool(cfg.NumCPUBlocks, c.pool, &c.events, cfg.Kind == hruntime.KindVLLM)
		// Each rank reloads its share of a block over its own link.
		c.loadSecondsPerBlock = gpu.HostLoadSeconds(float64(perf.RankBlockBytes()))
	}
	c.blockBytes = int64(perf.BlockBytes())
	if cfg.Store != nil {
		c.store = cfg.Store
		// The disk reads the whole block once; the ranks copy their
		// shares to their GPUs at the same time.
		c.storeSecondsPerBlock = float64(c.blockBytes)/(cfg.DiskGBps*1e9) + gpu.HostLoadSeconds(float64(perf.RankBlockBytes()))
	}
	c.waiting.less = c.waitLess
	return c, nil
}

// Config returns the effective configuration, defaults and derived
// NumGPUBlocks and MaxModelLen filled in.
func (c *Core) Config() Config { return c.cfg }

// GPU returns the modelled GPU.
func (c *Core) GPU() catalog.GPU { return c.gpu }

// Model returns the modelled model.
func (c *Core) Model() catalog.Model { return c.model }

// CheckRequest reports whether r could be added, ignoring id clashes. It only
// reads the immutable configuration, so it is safe from any goroutine.
func (c *Core) CheckRequest(r *Request) error {
	if len(r.Prompt) == 0 || len(r.Output) == 0 {
		return fmt.Errorf("request %q: %w", r.ID, ErrEmptyRequest)
	}
	if err := CheckContextLength(c.cfg.MaxModelLen, len(r.Prompt), int64(len(r.Output))); err != nil {
		return fmt.Errorf("request %q: %w", r.ID, err)
	}
	return nil
}

// Add queues a request at time now. The core copies the token slices.
func (c *Core) Add(now time.Duration, r *Request) error {
	if err := c.CheckRequest(r); err != nil {
		return err
	}
	if _, dup := c.byID[r.ID]; dup {
		return fmt.Errorf("request %q: %w", r.ID, ErrDuplicateID)
	}
	n := len(r.Prompt) + len(r.Output)
	tokens := make([]uint32, n)
	copy(tokens, r.Prompt)
	copy(tokens[len(r.Prompt):], r.Output)
	maxBlocks := (n + c.cfg.BlockSize - 1) / c.cfg.BlockSize
	c.arrival++
	priority := r.Priority // lower first in the queue
	if c.cfg.PriorityHigherFirst {
		priority = -priority
	}
	req := &request{
		id:           r.ID,
		tokens:       tokens,
		promptLen:    len(r.Prompt),
		outputLen:    len(r.Output),
		priority:     priority,
		stop:         r.StopAtEnd,
		arrival:      c.arrival,
		addedAt:      now,
		blocks:       make([]int32, 0, maxBlocks),
		hashes:       make([]uint64, 0, maxBlocks),
		cachedTokens: -1,
	}
	if r.CacheSalt != "" {
		req.salt = []byte(r.CacheSalt)
	}
	if c.cfg.Kind == hruntime.KindSGLang {
		req.digests = make([][sha256.Size]byte, 0, maxBlocks)
	}
	c.byID[r.ID] = req
	c.waiting.push(req)
	return nil
}

// Abort drops a request, waiting or running, and frees its blocks at once.
// It reports whether the request was live.
func (c *Core) Abort(now time.Duration, id string) bool {
	r, ok := c.byID[id]
	if !ok {
		return false
	}
	if r.running {
		for i, x := range c.running {
			if x == r {
				c.removeRunning(i)
				break
			}
		}
	} else {
		c.waiting.remove(r)
	}
	c.freeBlocks(r)
	r.running = false
	delete(c.byID, id)
	return true
}

// HasWork reports whether a request is waiting or running.
func (c *Core) HasWork() bool { return len(c.running) > 0 || c.waiting.len() > 0 }

// Reset clears the prefix cache like vLLM's /reset_prefix_cache: every block
// forgets its hash (free blocks become plain free blocks, blocks in use keep
// serving their requests but can no longer be hit) and one AllBlocksCleared
// event is published. The host-RAM tier is emptied too, since a consumer of
// AllBlocksCleared forgets every tier of the engine.
func (c *Core) Reset(now time.Duration) {
	c.pool.clear()
	if c.cpu != nil {
		c.cpu.clear()
	}
	// Appended: events of a step still held by a Runner go out first.
	c.events = append(c.events, kvevents.Event{Kind: kvevents.AllBlocksCleared})
	c.publish(now)
}

// CachedBlockHashes returns, sorted, the hash of every block that holds
// reusable KV, in use or cached-free.
func (c *Core) CachedBlockHashes() []uint64 { return c.pool.hashes() }

// CachedCPUBlockHashes returns, sorted, the hash of every block the host-RAM
// tier holds; nil when the tier is off.
func (c *Core) CachedCPUBlockHashes() []uint64 {
	if c.cpu == nil {
		return nil
	}
	return c.cpu.hashes()
}

// Stats returns the engine's counters and gauges.
func (c *Core) Stats() Stats {
	s := c.stats
	s.Running = len(c.running)
	s.Waiting = c.waiting.len()
	s.NumGPUBlocks = c.cfg.NumGPUBlocks
	s.BlockSize = c.cfg.BlockSize
	s.UsedBlocks = c.cfg.NumGPUBlocks - c.pool.numFree
	s.CachedFreeBlocks = c.pool.numCachedFree
	s.CachedBlocks = len(c.pool.byHash)
	s.KVUsage = float64(s.UsedBlocks) / float64(c.cfg.NumGPUBlocks)
	if c.cpu != nil {
		s.NumCPUBlocks = c.cfg.NumCPUBlocks
		s.CPUCachedBlocks = c.cpu.len()
	}
	return s
}

// flushEvents publishes events held back by holdEvents.
func (c *Core) flushEvents(now time.Duration) { c.publish(now) }

func (c *Core) publish(now time.Duration) {
	if c.sink != nil && len(c.events) > 0 {
		c.sink.PublishKVEvents(now, c.events)
	}
	c.events = c.events[:0]
}

// CachedPrefixBlocks returns how many leading full blocks of tokens the
// prefix cache holds right now, without touching the cache's LRU order. It is
// how tests compare an outside view of the cache (the router's, rebuilt from
// events) with the engine's own.
func (c *Core) CachedPrefixBlocks(tokens []uint32) int {
	bs := c.cfg.BlockSize
	r := &request{tokens: tokens}
	n := 0
	for ; (n+1)*bs <= len(tokens); n++ {
		if _, ok := c.pool.lookup(c.blockHash(r, n)); !ok {
			break
		}
	}
	return n
}
