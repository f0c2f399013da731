package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hearth-llm/hearth/catalog"
)

// smiGPUFields are the --query-gpu fields SMISource asks for, in the order
// ParseSMIGPUs reads them (nvidia-smi --help-query-gpu).
var smiGPUFields = []string{
	"index", "uuid", "name",
	"memory.total", "memory.used", "memory.free",
	"utilization.gpu", "temperature.gpu", "power.draw", "power.limit",
	"pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
	"compute_cap", "driver_version",
}

// smiAppFields are the --query-compute-apps fields, in the order
// ParseSMIApps reads them (nvidia-smi --help-query-compute-apps).
var smiAppFields = []string{"gpu_uuid", "pid", "used_memory", "process_name"}

// SMIGPUArgs and SMIAppArgs are the nvidia-smi command lines SMISource runs.
var (
	SMIGPUArgs = []string{"--query-gpu=" + strings.Join(smiGPUFields, ","), "--format=csv,noheader,nounits"}
	SMIAppArgs = []string{"--query-compute-apps=" + strings.Join(smiAppFields, ","), "--format=csv,noheader,nounits"}
)

// SMISource is a Discoverer that runs nvidia-smi, for machines where NVML
// cannot be loaded into this process (a build without cgo). Use it through a
// pointer: it remembers the driver's CUDA version once read.
type SMISource struct {
	// Path is the nvidia-smi to run; "nvidia-smi" (looked up on PATH) when
	// empty.
	Path string
	Node string
	// ProcRoot is where process names are read from; "/proc" when empty.
	ProcRoot string
	// Run runs path with args and returns its standard output; an error
	// for a non-zero exit carries the command's words. Nil runs it with
	// os/exec.
	Run func(ctx context.Context, path string, args ...string) ([]byte, error)

	mu   sync.Mutex
	cuda int // CUDA driver version once read from the plain nvidia-smi header, 0 before
}

var _ Discoverer = (*SMISource)(nil)

// Discover runs nvidia-smi for the GPUs, then for the compute processes
// (whose failure leaves processes unknown) and, once, for the CUDA version.
func (s *SMISource) Discover(ctx context.Context) (Inventory, error) {
	out, err := s.run(ctx, SMIGPUArgs...)
	if err != nil {
		return Inventory{}, err
	}
	gpus, host, err := ParseSMIGPUs(out, s.Node)
	if err != nil {
		return Inventory{}, err
	}
	if len(gpus) == 0 {
		return Inventory{}, ErrNoGPU
	}
	if out, err := s.run(ctx, SMIAppArgs...); err == nil {
		if apps, err := ParseSMIApps(out); err == nil {
			for i := range gpus {
				procs := apps[gpus[i].UUID]
				for j := range procs {
					if name := readComm(s.ProcRoot, procs[j].PID); name != "" {
						procs[j].Name = name
					}
				}
				gpus[i].Processes, gpus[i].ProcessesKnown = procs, true
			}
		}
	}
	host.CUDADriverVersion = s.cudaVersion(ctx)
	return Inventory{Host: host, GPUs: gpus}, nil
}

// cudaVersion reads "CUDA Version: 12.9" from the plain nvidia-smi table
// the first time it can; 0 while it cannot.
func (s *SMISource) cudaVersion(ctx context.Context) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cuda == 0 {
		if out, err := s.run(ctx); err == nil {
			s.cuda = ParseSMICUDAVersion(out)
		}
	}
	return s.cuda
}

// noDriverWords is how nvidia-smi says the kernel driver is not there.
const noDriverWords = "couldn't communicate with the NVIDIA driver"

// run runs nvidia-smi and turns its failures into the package's errors.
func (s *SMISource) run(ctx context.Context, args ...string) ([]byte, error) {
	path := s.Path
	if path == "" {
		path = "nvidia-smi"
	}
	runner := s.Run
	if runner == nil {
		runner = execSMI
	}
	out, err := runner(ctx, path, args...)
	if err == nil {
		return out, nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (nvidia-smi: %v)", ErrNoDriver, err)
	}
	words := strings.TrimSpace(string(out) + " " + err.Error())
	if strings.Contains(words, noDriverWords) {
		return nil, fmt.Errorf("%w (nvidia-smi: %s)", ErrNoDriver, firstLine(words))
	}
	if strings.Contains(words, "No devices were found") {
		return nil, ErrNoGPU
	}
	return nil, fmt.Errorf("nvidia-smi: %w", err)
}

// execSMI runs nvidia-smi; a failed run's error carries what it printed.
func execSMI(ctx context.Context, path string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		words := strings.TrimSpace(stdout.String() + "\n" + stderr.String())
		if words == "" {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", err, words)
	}
	return stdout.Bytes(), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// ErrBadSMIOutput is returned for nvidia-smi output that is not the CSV
// asked for.
var ErrBadSMIOutput = errors.New("nodes: unexpected nvidia-smi output")

// ParseSMIGPUs parses the output of nvidia-smi with SMIGPUArgs: one CSV line
// per GPU, fields in smiGPUFields' order. "[N/A]", "[Not Supported]" and
// other bracketed words leave a field unknown; "[GPU is lost]" or "[Requires
// Reset]" mark the GPU Lost. Memory comes in MiB and is returned in bytes.
func ParseSMIGPUs(out []byte, node string) ([]GPU, Host, error) {
	host := Host{Node: node, Source: "nvidia-smi"}
	var gpus []GPU
	for n, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != len(smiGPUFields) {
			return nil, Host{}, fmt.Errorf("%w: line %d has %d fields, want %d", ErrBadSMIOutput, n+1, len(f), len(smiGPUFields))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		index, ok := smiInt(f[0])
		if !ok {
			return nil, Host{}, fmt.Errorf("%w: line %d: index %q", ErrBadSMIOutput, n+1, f[0])
		}
		g := NewGPU(node, index)
		for _, v := range f {
			if lostWord(v) {
				g.Lost, g.Err = true, strings.Trim(v, "[]")
				break
			}
		}
		g.UUID, g.Name = smiString(f[1]), smiString(f[2])
		if total, ok := smiMiB(f[3]); ok {
			g.MemoryTotal = total
		}
		used, okUsed := smiMiB(f[4])
		free, okFree := smiMiB(f[5])
		if okUsed && okFree {
			g.MemoryUsed, g.MemoryFree, g.MemoryUsageKnown = used, free, true
		}
		setInt(&g.UtilizationPct, f[6])
		setInt(&g.TemperatureC, f[7])
		setFloat(&g.PowerDrawW, f[8])
		setFloat(&g.PowerLimitW, f[9])
		setInt(&g.PCIeGenCurrent, f[10])
		setInt(&g.PCIeGenMax, f[11])
		setInt(&g.PCIeWidthCurrent, f[12])
		setInt(&g.PCIeWidthMax, f[13])
		if major, minor, ok := strings.Cut(f[14], "."); ok {
			ma, ok1 := smiInt(major)
			mi, ok2 := smiInt(minor)
			if ok1 && ok2 {
				g.ComputeMajor, g.ComputeMinor = ma, mi
			}
		}
		if v := smiString(f[15]); v != "" && host.DriverVersion == "" {
			host.DriverVersion = v
		}
		if g.Name != "" || g.MemoryTotal != 0 {
			g.Kind = catalog.GPUByName(g.Name, g.MemoryTotal).Kind
		}
		gpus = append(gpus, g)
	}
	return gpus, host, nil
}

// ParseSMIApps parses the output of nvidia-smi with SMIAppArgs into the
// processes of each GPU, keyed by GPU UUID, one entry per PID. A name is
// the executable's base name, "" when nvidia-smi does not know it.
func ParseSMIApps(out []byte) (map[string][]Process, error) {
	apps := map[string][]Process{}
	for n, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No running") {
			continue
		}
		// The name is last and may itself hold commas.
		f := strings.SplitN(line, ",", len(smiAppFields))
		if len(f) != len(smiAppFields) {
			return nil, fmt.Errorf("%w: process line %d has %d fields, want %d", ErrBadSMIOutput, n+1, len(f), len(smiAppFields))
		}
		uuid := strings.TrimSpace(f[0])
		pid, ok := smiInt(strings.TrimSpace(f[1]))
		if !ok || uuid == "" {
			return nil, fmt.Errorf("%w: process line %d: %q", ErrBadSMIOutput, n+1, line)
		}
		used, _ := smiMiB(strings.TrimSpace(f[2]))
		name := smiString(strings.TrimSpace(f[3]))
		if name != "" {
			name = filepath.Base(name)
		}
		procs := apps[uuid]
		dup := false
		for i := range procs {
			if procs[i].PID == pid {
				procs[i].UsedBytes = max(procs[i].UsedBytes, used)
				dup = true
			}
		}
		if !dup {
			apps[uuid] = append(procs, Process{PID: pid, UsedBytes: used, Name: name})
		}
	}
	return apps, nil
}

var cudaVersionRE = regexp.MustCompile(`CUDA Version:\s*(\d{1,4})\.(\d{1,2})`)

// ParseSMICUDAVersion reads "CUDA Version: 12.9" from the header of plain
// nvidia-smi and returns it as NVML does (12090); 0 when it is not there.
func ParseSMICUDAVersion(out []byte) int {
	m := cudaVersionRE.FindSubmatch(out)
	if m == nil {
		return 0
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return major*1000 + minor*10
}

// smiUnknown reports whether v is one of nvidia-smi's words for a value it
// does not have: "[N/A]", "[Not Supported]", "N/A", "[Unknown Error]"...
func smiUnknown(v string) bool {
	return v == "" || strings.HasPrefix(v, "[") || strings.EqualFold(v, "N/A") || strings.EqualFold(v, "Not Supported")
}

// lostWord reports whether v is nvidia-smi saying the GPU is gone.
func lostWord(v string) bool {
	l := strings.ToLower(v)
	return strings.HasPrefix(l, "[") && (strings.Contains(l, "gpu is lost") || strings.Contains(l, "requires reset"))
}

func smiString(v string) string {
	if smiUnknown(v) {
		return ""
	}
	return v
}

// smiInt parses a non-negative decimal that fits an int32.
func smiInt(v string) (int, bool) {
	if smiUnknown(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 31)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// smiMiB parses a count of MiB into bytes.
func smiMiB(v string) (uint64, bool) {
	if smiUnknown(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > math.MaxUint64>>20 {
		return 0, false
	}
	return n << 20, true
}

func setInt(dst *int, v string) {
	if n, ok := smiInt(v); ok {
		*dst = n
	}
}

// setFloat sets a non-negative finite figure, leaving dst unknown otherwise.
func setFloat(dst *float64, v string) {
	if smiUnknown(v) {
		return
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return
	}
	*dst = x
}
