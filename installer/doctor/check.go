package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Status is a check's verdict.
type Status string

// The three verdicts, from best to worst.
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one check's verdict. Its JSON form is what `hearth doctor
// --json` prints in its "checks" list.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Evidence is one line saying what was found ("driver 580.95.05").
	Evidence string `json:"evidence"`
	// Fix is one line saying what to do; "" when the check passed.
	Fix string `json:"fix"`
}

// ExitCode is the exit status of a command that ran checks: 0 when all
// pass, 1 when any fails, 2 when some warn and none fails.
func ExitCode(checks []Check) int {
	code := 0
	for _, c := range checks {
		switch c.Status {
		case Fail:
			return 1
		case Warn:
			code = 2
		}
	}
	return code
}

// The names of the checks, in the order a Doctor returns them. A GPU's
// memory check is named GPUMemoryName(index).
const (
	CheckDriver        = "nvidia driver"
	CheckNVML          = "nvml"
	CheckCUDA          = "cuda version"
	CheckDocker        = "docker"
	CheckNVIDIARuntime = "nvidia container runtime"
	CheckDeepGPU       = "gpu in a container"
	CheckHFCacheDisk   = "disk: hugging face cache"
	CheckKVDisk        = "disk: ssd kv tier"
	CheckRAM           = "host ram"
	CheckAPIPort       = "api port"
	CheckMulticast     = "multicast"
	CheckDataDir       = "data directory"
)

// GPUMemoryName is the name of GPU index's memory check.
func GPUMemoryName(index int) string { return fmt.Sprintf("gpu %d memory", index) }

// ErrNoDriver is what a GPUSource's error wraps when no NVIDIA driver can be
// reached at all (neither NVML's library nor nvidia-smi).
var ErrNoDriver = errors.New("no NVIDIA driver")

// GPUSource reads the machine's NVIDIA driver and GPUs.
type GPUSource interface {
	// GPUs returns what the driver reports. An error wrapping ErrNoDriver
	// means there is no driver; any other error means a driver that could
	// not be read (NVML failed), and the facts may still be partly filled.
	GPUs(ctx context.Context) (GPUFacts, error)
}

// GPUFacts is what the driver reports.
type GPUFacts struct {
	// Source is where the facts came from: "nvml", "nvidia-smi" or "sim".
	Source string
	// NVMLErr says why NVML could not be used when the facts came from
	// elsewhere (nvidia-smi); "" otherwise.
	NVMLErr string
	// DriverVersion is the driver's version ("580.95.05"), "" when unknown.
	// CUDAVersion is the newest CUDA it runs as major*1000 + minor*10
	// (12090 for 12.9), 0 when unknown.
	DriverVersion string
	CUDAVersion   int
	GPUs          []GPUMemory
}

// Simulated reports whether the facts describe simulated GPUs.
func (f GPUFacts) Simulated() bool { return f.Source == "sim" }

// GPUMemory is what the checks read of one GPU: its memory, and the
// driver's error. It is not a second GPU value: the adapter fills it from
// nodes.GPU, which the doctor does not import (it would pull NVML in).
type GPUMemory struct {
	Index int
	Name  string
	// MemoryTotal is the board's memory in bytes, 0 when unknown;
	// MemoryFree is meaningful only when MemoryKnown.
	MemoryTotal uint64
	MemoryFree  uint64
	MemoryKnown bool
	// HearthBytes is memory Hearth's own engines hold on the GPU, which
	// counts as available: they make way for the planned model. The
	// adapter decides how it finds them.
	HearthBytes uint64
	// Err is the driver's error reading this GPU, "" when it read fine.
	Err string
}

// Available is the memory the planned model may use: what is free plus
// what Hearth's own engines hold.
func (g GPUMemory) Available() uint64 { return min(g.MemoryFree+g.HearthBytes, g.MemoryTotal) }

// Fitter says how the planned model fits one GPU.
type Fitter interface {
	// Fit plans the model on g with available bytes free.
	Fit(g GPUMemory, available uint64) (Fit, error)
}

// Fit is how the planned model fits one GPU.
type Fit struct {
	Model string // display name of the planned model
	// Fits says the model's weights and a minimal context fit. Context is
	// then the context that fits in the available memory, IdleContext
	// what would fit were the whole GPU free, and ModelContext the
	// model's own maximum.
	Fits                               bool
	Context, IdleContext, ModelContext int
	// Reason is one sentence from the planner when it does not fit.
	Reason string
}

// DockerSource reads the Docker Engine.
type DockerSource interface {
	// Info reports the engine. An error wrapping fs.ErrPermission means the
	// socket refused this user.
	Info(ctx context.Context) (DockerInfo, error)
	// ImagePresent reports whether the engine has image locally.
	ImagePresent(ctx context.Context, image string) (bool, error)
	// RunGPU runs cmd in a container of image that asks for every GPU,
	// waits for it to exit, removes it, and returns its output. An error
	// means the container could not start or exited non-zero; it carries
	// Docker's reason.
	RunGPU(ctx context.Context, image string, cmd []string) (string, error)
}

// DockerInfo is what the Docker Engine says of itself.
type DockerInfo struct {
	ServerVersion string
	APIVersion    string
	// Runtimes are the container runtimes it knows ("runc", "nvidia").
	Runtimes []string
	// CDISpecDirs are where it looks for CDI specs, CDIDevices the CDI
	// devices it found ("nvidia.com/gpu=0"; API 1.50 and newer).
	CDISpecDirs []string
	CDIDevices  []string
	// OperatingSystem is what the engine says it runs on ("Docker
	// Desktop", "Debian GNU/Linux 13 (trixie)").
	OperatingSystem string
}

// permissionDenied reports whether err says the Docker socket refused
// this user.
func permissionDenied(err error) bool {
	return errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "permission denied")
}

func pass(name, evidence string) Check { return Check{Name: name, Status: Pass, Evidence: evidence} }

func warn(name, evidence, fix string) Check {
	return Check{Name: name, Status: Warn, Evidence: evidence, Fix: fix}
}

func fail(name, evidence, fix string) Check {
	return Check{Name: name, Status: Fail, Evidence: evidence, Fix: fix}
}

// oneLine keeps the first line of s, for evidence taken from errors and
// command output.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// cudaString writes NVML's CUDA version form as "12.9".
func cudaString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
