// Package nodes discovers GPUs: local ones through NVML (behind the cgo build
// tag) or nvidia-smi, or a simulated list such as "2x4090".
//
// A GPU is a plain struct so that everything downstream can be tested without
// hardware. Its kind, and the memory of a simulated one, come from the
// catalog package, which also maps the marketing names NVML reports to kinds.
// The package must not start engines; that is runtime's job.
//
// # Sources
//
// A Discoverer reads the machine's GPUs afresh on every Discover. There are
// three:
//
//   - SimSource: a simulated list (ParseSimSpec); no driver is asked.
//   - NVMLSource: go-nvml over the driver's libnvidia-ml.so.1, opened at run
//     time. It needs cgo on Linux (nvml.go, build tag linux && cgo); other
//     builds leave it out (nvml_other.go). It initialises NVML once and
//     shuts it down on Close.
//   - SMISource: runs nvidia-smi with --query-gpu and --query-compute-apps
//     (CSV) and reads the CUDA version from its plain header, for builds
//     without NVML.
//
// NewDiscoverer chooses in that order: the simulated list when one is
// given; NVML when compiled in and its library loads; nvidia-smi when it is
// found; otherwise ErrNoDriver itself, whose text is the sentence a user
// sees. The Discoverer it returns may be an io.Closer; callers close it
// when it is.
//
// # Unknown fields
//
// What a board or a source cannot report is unknown, never zero: integers
// are negative, PowerDrawW and PowerLimitW negative, MemoryTotal 0, and the
// MemoryUsageKnown and ProcessesKnown flags false (NewGPU returns a GPU with
// everything unknown). NVML's ERROR_NOT_SUPPORTED and nvidia-smi's "[N/A]"
// and "[Not Supported]" leave a field unknown; another error reading one
// field leaves it unknown and is noted in the GPU's Err.
//
// # Lost GPUs
//
// A GPU the driver says has fallen off the bus or needs a reset
// (ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED, or ERROR_UNKNOWN for its
// handle; "[GPU is lost]" from nvidia-smi) is returned with Lost set and the
// driver's words in Err, at its index, and the other GPUs still read. A
// Discover error means no GPU could be listed at all: ErrNoDriver when no
// driver can be reached, ErrNoGPU when it lists none. Since each Discover
// reads afresh, a GPU that answers again reads normally again; when the
// driver stops answering altogether (reloaded under the daemon), NVMLSource
// shuts its session down and initialises NVML again at the next reading.
//
// # Sampler
//
// A Sampler reads a Discoverer every interval (2 s) and keeps the latest
// reading, which the console, the planner and the Prometheus gauges read
// (it is a prometheus.Collector of hearth_gpu_*; an unknown field has no
// series). It turns readings into events: OnLost when a GPU that read fine
// is lost, drops out of the list, or the whole reading fails; OnFound when
// a lost GPU reads fine again. A GPU once seen stays in the latest reading,
// marked lost with the reason, until it returns. GPUs are told apart by
// UUID, or by node and index when the driver gives no UUID.
package nodes
