package daemon

import (
	"time"

	"github.com/hearth-llm/hearth/nodes"
)

// Options only tests set: where the GPUs are read from, and how often.

// WithGPUSource reads the GPUs from d instead of the simulated list or the
// driver.
func WithGPUSource(d nodes.Discoverer) Option { return func(c *Config) { c.gpuSource = d } }

// WithGPUInterval reads the GPUs this often (default: every 2 s).
func WithGPUInterval(d time.Duration) Option { return func(c *Config) { c.gpuInterval = d } }
