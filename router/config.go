package router

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config fields left zero.
const (
	DefaultPolicy                  = PolicyHearth
	DefaultHostCacheHitWeight      = 0.75
	DefaultDiskCacheHitWeight      = 0.25
	DefaultSaturationFraction      = 0.95
	DefaultSaturationPendingTokens = 131072
	DefaultSessionTTL              = 30 * time.Minute
	DefaultDecisionLogSize         = 256
	DefaultPriorityWait            = 2 * time.Second
)

// Config configures a Router. Zero fields take the documented defaults.
type Config struct {
	// Policy is the default routing policy (DefaultPolicy).
	Policy string
	// OverlapScoreWeight weighs prefill blocks against decode blocks in the
	// kv policy; 0 means Dynamo's default 1.0 (use least_loaded to ignore
	// the cache entirely).
	OverlapScoreWeight float64
	// Temperature of the kv policy's softmax sampling; 0 picks the lowest.
	Temperature float64
	// HostCacheHitWeight and DiskCacheHitWeight credit the kv policy with
	// blocks a worker holds in host RAM or on disk beyond its GPU prefix,
	// as fractions of a GPU hit: Dynamo's host_cache_hit_weight and
	// disk_cache_hit_weight, default 0.75 and 0.25 (Dynamo's defaults). A
	// negative value gives no credit.
	HostCacheHitWeight float64
	DiskCacheHitWeight float64
	// MaxIndexEntries bounds the block index, in (block, worker, tier)
	// entries over all workers (DefaultMaxIndexEntries).
	MaxIndexEntries int
	// QueueSize is how many requests may wait while every worker is
	// saturated (DefaultQueueSize); negative disables the queue, so requests
	// are routed even to saturated workers.
	QueueSize int
	// A worker is saturated when its running requests hold at least
	// SaturationFraction of its KV capacity or at least
	// SaturationPendingTokens prompt tokens wait for prefill on it.
	SaturationFraction      float64
	SaturationPendingTokens int
	// ActiveTTL expires requests whose end is never reported (300 s).
	ActiveTTL time.Duration
	// ApproxTTL is how long approximate mode keeps a prediction (120 s).
	ApproxTTL time.Duration
	// SessionTTL forgets an idle agent session (30 min) unless its
	// session_control said otherwise.
	SessionTTL time.Duration
	// PeerLoadTTL expires another replica's load on a worker that it has
	// not reported again (DefaultPeerLoadTTL); see SetPeerLoad.
	PeerLoadTTL time.Duration
	// DecisionLogSize is how many recent decisions Decisions can return.
	DecisionLogSize int
	// Seed makes random choices reproducible.
	Seed int64
	// PriorityWait is what one level of Hints.Priority is worth in the
	// queue, in waiting time (DefaultPriorityWait): a waiting request goes
	// before one of lower priority that arrived up to (difference ×
	// PriorityWait) after it, and after any that arrived later. Its
	// priority thus rises with its wait, so a low-priority request waits
	// at most that long behind later arrivals and is never starved.
	// Negative makes Priority strict, as StrictPriority is.
	PriorityWait time.Duration
	// BlockPriorities is how many blocks of recent prompts the router
	// remembers the priority of, for the node's SSD store to weigh in its
	// eviction (NodeBlockPriority); rounded up to a power of two, 16 bytes
	// each. 0 keeps none (a node without a store).
	BlockPriorities int
	// Hearth tunes the hearth policy.
	Hearth HearthConfig
}

// Validate reports the first invalid field. It accepts zero fields, which
// New replaces with defaults.
func (c Config) Validate() error {
	switch {
	case c.Policy != "" && !knownPolicy(c.Policy):
		return fmt.Errorf("router config: policy: %w: %q", ErrUnknownPolicy, c.Policy)
	case c.OverlapScoreWeight < 0:
		return fmt.Errorf("router config: overlap score weight %v is negative", c.OverlapScoreWeight)
	case c.Temperature < 0:
		return fmt.Errorf("router config: temperature %v is negative", c.Temperature)
	case c.MaxIndexEntries < 0:
		return fmt.Errorf("router config: max index entries %d is negative", c.MaxIndexEntries)
	case c.SaturationFraction < 0 || c.SaturationFraction > 1:
		return fmt.Errorf("router config: saturation fraction %v is outside [0, 1]", c.SaturationFraction)
	case c.SaturationPendingTokens < 0:
		return fmt.Errorf("router config: saturation pending tokens %d is negative", c.SaturationPendingTokens)
	case c.ActiveTTL < 0 || c.ApproxTTL < 0 || c.SessionTTL < 0 || c.PeerLoadTTL < 0:
		return errors.New("router config: negative ttl")
	case c.DecisionLogSize < 0:
		return fmt.Errorf("router config: decision log size %d is negative", c.DecisionLogSize)
	case c.BlockPriorities < 0 || c.BlockPriorities > 1<<30:
		return fmt.Errorf("router config: block priorities %d is outside [0, 2^30]", c.BlockPriorities)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.OverlapScoreWeight == 0 {
		c.OverlapScoreWeight = 1
	}
	switch {
	case c.HostCacheHitWeight == 0:
		c.HostCacheHitWeight = DefaultHostCacheHitWeight
	case c.HostCacheHitWeight < 0:
		c.HostCacheHitWeight = 0
	}
	switch {
	case c.DiskCacheHitWeight == 0:
		c.DiskCacheHitWeight = DefaultDiskCacheHitWeight
	case c.DiskCacheHitWeight < 0:
		c.DiskCacheHitWeight = 0
	}
	if c.MaxIndexEntries == 0 {
		c.MaxIndexEntries = DefaultMaxIndexEntries
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.SaturationFraction == 0 {
		c.SaturationFraction = DefaultSaturationFraction
	}
	if c.SaturationPendingTokens == 0 {
		c.SaturationPendingTokens = DefaultSaturationPendingTokens
	}
	if c.ActiveTTL == 0 {
		c.ActiveTTL = DefaultActiveTTL
	}
	if c.ApproxTTL == 0 {
		c.ApproxTTL = DefaultApproxTTL
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.PeerLoadTTL == 0 {
		c.PeerLoadTTL = DefaultPeerLoadTTL
	}
	if c.DecisionLogSize == 0 {
		c.DecisionLogSize = DefaultDecisionLogSize
	}
	if c.PriorityWait == 0 {
		c.PriorityWait = DefaultPriorityWait
	}
	c.Hearth = c.Hearth.withDefaults()
	return c
}

// Option configures New.
type Option func(*Router)

// Clock is the time the router reads: it expires sessions and peers' load
// but sets no timers. A clock.Clock is one; the benchmark's simulation
// passes its virtual time.
type Clock interface{ Now() time.Time }

// WithClock sets the clock used for expiry (default the real one).
func WithClock(c Clock) Option { return func(r *Router) { r.clock = c } }

// now is the router's time.
func (r *Router) now() time.Time { return r.clock.Now() }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Router) { r.log = l } }

// WithMetrics records into m (default: no metrics).
func WithMetrics(m *Metrics) Option { return func(r *Router) { r.metrics = m } }
