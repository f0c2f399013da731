package daemon

import (
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// An Option changes how Run builds the daemon beyond what the command line
// says: where its parts come from and how fast they tick. Tests use them
// to run the whole daemon quickly and without GPUs.
type Option func(*Config)

// WithHearthBinary runs simulated engines (--engine-runtime process, and
// the simulated images) from this hearth binary instead of the running
// one.
func WithHearthBinary(path string) Option { return func(c *Config) { c.hearthBinary = path } }

// WithBackoff sets how the supervisor waits between an engine's restarts.
func WithBackoff(b hruntime.Backoff) Option { return func(c *Config) { c.backoff = b } }

// WithKVCheckWait bounds each wait of the start-up KV-event self-check
// (hruntime.SupervisorConfig.KVCheckWait) instead of the default: a test
// of an engine that publishes nothing need not wait it out.
func WithKVCheckWait(d time.Duration) Option { return func(c *Config) { c.kvCheckWait = d } }

// WithSpecHook changes each engine's spec once it is planned (an engine
// that fails at start, say).
func WithSpecHook(f func(*hruntime.Spec)) Option { return func(c *Config) { c.tweakSpec = f } }

// WithConsoleTiming sets how often the console samples and pushes, and how
// far back its charts reach (0: the console's defaults).
func WithConsoleTiming(interval, chartWindow time.Duration) Option {
	return func(c *Config) { c.consoleInterval, c.consoleChartWindow = interval, chartWindow }
}

// WithConsoleClock gives the console a clock of its own: its login
// limiter's waits, its logins' lifetimes and its hub's ticks follow clk
// (a clock.Fake holds a wait open for as long as a test needs).
func WithConsoleClock(clk clock.Clock) Option { return func(c *Config) { c.consoleClock = clk } }

// WithSimTokenizer has in-process simulated engines tokenize with what
// wrap makes of Hearth's tokenizer (sim.MisreadToken: a wrong one, for the
// start-up self-check).
func WithSimTokenizer(wrap func(sim.Tokenizer) sim.Tokenizer) Option {
	return func(c *Config) { c.simTokenizer = wrap }
}

// WithGPUSource reads the GPUs from d instead of the simulated list or the
// driver: a test's GPUs, whose memory another program takes.
func WithGPUSource(d nodes.Discoverer) Option { return func(c *Config) { c.gpuSource = d } }

// WithGPUInterval reads the GPUs this often (default: every 2 s).
func WithGPUInterval(d time.Duration) Option { return func(c *Config) { c.gpuInterval = d } }

// WithGPUTakenPolicy sets when another program's memory on a GPU drains
// the node and when its release ends the drain (DefaultGPUTakenPolicy).
func WithGPUTakenPolicy(p GPUTakenPolicy) Option { return func(c *Config) { c.gpuTaken = &p } }

// WithKeepAliveInterval sets how often a stream waiting for its model to
// load gets a keep-alive (api.Config.KeepAliveInterval).
func WithKeepAliveInterval(d time.Duration) Option {
	return func(c *Config) { c.keepAliveInterval = d }
}
