package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/installer/wsl"
)

// Defaults of the Doctor's thresholds.
const (
	DefaultMinCacheFree uint64 = 50 << 30
	DefaultMinKVFree    uint64 = 20 << 30
	DefaultMinRAM       uint64 = 16 << 30
)

// cuda13 is NVML's encoding of CUDA 13.0, the first CUDA of the R580
// drivers.
const cuda13 = 13000

// The fixes more than one check gives.
const (
	fixInstallDriver = "install the NVIDIA driver (R580 or newer for CUDA 13 images)"
	fixDockerGroup   = "add yourself to the docker group: sudo usermod -aG docker $USER, then log in again"
	fixNVIDIARuntime = "install nvidia-container-toolkit, then: sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker " +
		"(or generate CDI specs: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)"
)

// Doctor runs the checks of a host. Its zero value checks nothing it has
// no source for: a nil GPUSource or DockerSource fails those checks as
// not available.
type Doctor struct {
	GPUs   GPUSource
	Fitter Fitter // nil: a GPU's memory is reported, not weighed against a model
	Docker DockerSource
	System System // nil: HostSystem{}

	// EngineImage is the engine image Hearth runs for a driver that runs
	// CUDA cudaVersion (0 when unknown), and the CUDA version that image
	// needs; nil skips the comparison.
	EngineImage func(cudaVersion int) (image string, needsCUDA int)

	// HFCacheDir is the Hugging Face cache, KVDir the SSD KV tier's
	// directory, DataDir Hearth's state, Addr the API's listen address.
	HFCacheDir, KVDir, DataDir, Addr string
	// Serving says Addr is held by this very process (the daemon's
	// Health page): the port check reports it as serving instead of
	// trying to listen.
	Serving bool

	// Deep also starts a container that asks for the GPUs (DeepImage, or
	// the engine image when "") and runs DeepCommand in it (nil:
	// nvidia-smi -L).
	Deep        bool
	DeepImage   string
	DeepCommand []string

	// WSL is what wsl.Detect found of the host; nil or not WSL2 adds no
	// WSL check. ClusterPorts are the cluster's TCP ports (joins and the
	// engine proxy, the NATS routes), which the WSL networking fixes open
	// beside the API's.
	WSL          *wsl.Facts
	ClusterPorts []int

	// Tokenizers reads a running daemon's engines' start-up self-checks
	// of their tokenization, one check each; nil adds none.
	Tokenizers TokenizerSource
	// KVEvents reads their start-up KV-event self-checks, one check
	// each; nil adds none.
	KVEvents KVEventsSource
	// Thresholds under which free space and memory warn; 0 takes the
	// defaults above.
	MinCacheFree, MinKVFree, MinRAM uint64
}

// Check runs every check and returns them in a fixed order: driver, NVML,
// CUDA, each GPU's memory, Docker, the NVIDIA container runtime, the GPU in
// a container (Deep only), disk for the cache and the KV tier, host RAM,
// the API port, multicast and the data directory; on WSL2 the WSL checks
// (wsl2, its networking, firewall, systemd and pinned memory); then each
// engine's tokenizer and KV events, when a daemon runs (Tokenizers,
// KVEvents).
func (d *Doctor) Check(ctx context.Context) []Check {
	var checks []Check
	facts, gpuErr := d.gpuFacts(ctx)
	checks = append(checks, d.checkDriver(facts, gpuErr), d.checkNVML(facts, gpuErr), d.checkCUDA(facts, gpuErr))
	checks = append(checks, d.checkGPUMemory(facts, gpuErr)...)

	var info DockerInfo
	dockerErr := errors.New("no Docker client")
	if d.Docker != nil {
		info, dockerErr = d.Docker.Info(ctx)
	}
	checks = append(checks, checkDocker(info, dockerErr), d.checkNVIDIARuntime(info, dockerErr))
	if d.Deep {
		checks = append(checks, d.checkDeep(ctx, facts, dockerErr))
	}

	sys := d.System
	if sys == nil {
		sys = HostSystem{}
	}
	checks = append(checks,
		d.checkDisk(sys, CheckHFCacheDisk, d.HFCacheDir, orDefault(d.MinCacheFree, DefaultMinCacheFree),
			"free space there, or point HF_HOME at a larger disk (a 14B FP8 model takes about 16 GB)",
			"weights there are read over 9P, a few times slower than WSL's own disk: export HF_HOME=$HOME/.cache/huggingface (on the WSL ext4 disk) and move the models there"),
		d.checkDisk(sys, CheckKVDisk, d.KVDir, orDefault(d.MinKVFree, DefaultMinKVFree),
			"free space there, or move Hearth's data directory (hearth up --data-dir) to a larger SSD",
			"the SSD KV tier there goes over 9P: keep Hearth's data directory on WSL's own disk (hearth up --data-dir ~/.local/share/hearth)"),
		checkRAM(sys, orDefault(d.MinRAM, DefaultMinRAM)),
		d.checkPort(sys),
		d.checkMulticast(sys),
		checkDataDir(sys, d.DataDir),
	)
	if d.WSL != nil && d.WSL.WSL2 {
		checks = append(checks, d.wslChecks()...)
	}
	checks = append(checks, d.checkTokenizers(ctx)...)
	return append(checks, d.checkKVEvents(ctx)...)
}

func orDefault(v, def uint64) uint64 {
	if v == 0 {
		return def
	}
	return v
}

func (d *Doctor) gpuFacts(ctx context.Context) (GPUFacts, error) {
	if d.GPUs == nil {
		return GPUFacts{}, fmt.Errorf("%w: no GPU source", ErrNoDriver)
	}
	return d.GPUs.GPUs(ctx)
}

func (d *Doctor) checkDriver(f GPUFacts, err error) Check {
	switch {
	case f.Simulated():
		return pass(CheckDriver, "simulated GPUs: no driver needed")
	case errors.Is(err, ErrNoDriver):
		return fail(CheckDriver, "no NVIDIA driver found: neither NVML's libnvidia-ml.so.1 nor nvidia-smi", fixInstallDriver)
	case f.DriverVersion != "":
		return pass(CheckDriver, "driver "+f.DriverVersion)
	case err != nil:
		return warn(CheckDriver, "a driver is present but could not be read: "+oneLine(err.Error()),
			"run nvidia-smi: after a driver upgrade, a \"driver/library version mismatch\" needs a reboot")
	}
	return warn(CheckDriver, "the driver did not report its version", "run nvidia-smi to see the driver's version")
}

func (d *Doctor) checkNVML(f GPUFacts, err error) Check {
	switch {
	case f.Simulated():
		return pass(CheckNVML, "simulated GPUs: NVML not used")
	case errors.Is(err, ErrNoDriver):
		return fail(CheckNVML, "libnvidia-ml.so.1 cannot be loaded: there is no driver", fixInstallDriver+"; NVML comes with it")
	case err != nil:
		return fail(CheckNVML, "NVML failed: "+oneLine(err.Error()),
			"make libnvidia-ml.so.1 match the loaded kernel module: reinstall the driver, or reboot after an upgrade")
	case f.NVMLErr != "":
		return warn(CheckNVML, "NVML not loadable ("+oneLine(f.NVMLErr)+"); GPUs read through "+f.Source,
			"run a hearth build with NVML (cgo) and make sure libnvidia-ml.so.1 is on the loader's path")
	}
	return pass(CheckNVML, "NVML loaded ("+f.Source+")")
}

func (d *Doctor) checkCUDA(f GPUFacts, err error) Check {
	switch {
	case f.Simulated():
		return pass(CheckCUDA, "simulated GPUs: the simulated engines need no CUDA")
	case errors.Is(err, ErrNoDriver):
		return fail(CheckCUDA, "no driver, so no CUDA", fixInstallDriver)
	case f.CUDAVersion == 0:
		return warn(CheckCUDA, "the driver did not report its CUDA version",
			"run nvidia-smi; engine images need CUDA 12.9, and CUDA 13 (R580 or newer) for the default ones")
	}
	have := "driver runs CUDA " + cudaString(f.CUDAVersion)
	if d.EngineImage == nil {
		return pass(CheckCUDA, have)
	}
	image, needs := d.EngineImage(f.CUDAVersion)
	switch {
	case needs > 0 && f.CUDAVersion < needs:
		return fail(CheckCUDA, fmt.Sprintf("%s; the engine image %s needs CUDA %s", have, image, cudaString(needs)),
			"upgrade the NVIDIA driver (R580 or newer for CUDA 13 images)")
	case f.CUDAVersion < cuda13:
		return pass(CheckCUDA, fmt.Sprintf("%s: Hearth runs %s (CUDA 13 images need R580 or newer)", have, image))
	}
	return pass(CheckCUDA, fmt.Sprintf("%s: Hearth runs %s", have, image))
}

// checkGPUMemory weighs the planned model against each GPU's available
// memory: fail when it cannot fit, warn when other programs leave it a
// shorter context than the whole GPU would (the fix is theirs to close).
func (d *Doctor) checkGPUMemory(f GPUFacts, err error) []Check {
	if len(f.GPUs) == 0 {
		switch {
		case errors.Is(err, ErrNoDriver):
			return []Check{fail(GPUMemoryName(0), "no driver, so no GPU to plan on", fixInstallDriver)}
		case err != nil:
			return []Check{fail(GPUMemoryName(0), "no GPU could be read: "+oneLine(err.Error()), "fix the nvml check first")}
		}
		return []Check{fail(GPUMemoryName(0), "the driver lists no GPU",
			"check that the GPU is seated and powered, then that nvidia-smi lists it")}
	}
	var checks []Check
	for _, g := range f.GPUs {
		checks = append(checks, d.checkOneGPU(g))
	}
	return checks
}

func (d *Doctor) checkOneGPU(g GPUMemory) Check {
	name := GPUMemoryName(g.Index)
	label := fmt.Sprintf("gpu %d (%s)", g.Index, g.Name)
	if g.Err != "" {
		return fail(name, label+": "+oneLine(g.Err), "run nvidia-smi; a GPU that fell off the bus needs a reboot")
	}
	if !g.MemoryKnown || g.MemoryTotal == 0 {
		return warn(name, label+": the driver does not report its free memory",
			"run nvidia-smi to see what holds the GPU's memory")
	}
	avail := g.Available()
	memory := fmt.Sprintf("%s available of %s", gib(avail), gib(g.MemoryTotal))
	if g.HearthBytes > 0 {
		memory += fmt.Sprintf(", %s of it held by Hearth's engines", gib(min(g.HearthBytes, avail)))
	}
	if d.Fitter == nil {
		return pass(name, label+": "+memory)
	}
	fit, err := d.Fitter.Fit(g, avail)
	switch {
	case err != nil:
		return warn(name, label+": "+memory+"; planning failed: "+oneLine(err.Error()), "run hearth plan to see what fits")
	case !fit.Fits:
		return fail(name, fmt.Sprintf("%s: %s; %s", label, memory, oneLine(fit.Reason)),
			"close the programs holding the GPU's memory, or choose a smaller model (hearth plan shows what fits)")
	case fit.Context < fit.IdleContext:
		return warn(name, fmt.Sprintf("%s: %s; %s fits with a %s-token context, %s with the GPU free",
			label, memory, fit.Model, humanize.Comma(int64(fit.Context)), humanize.Comma(int64(fit.IdleContext))),
			fmt.Sprintf("close the programs holding %s of the GPU's memory for the longer context", gib(g.MemoryTotal-avail)))
	}
	return pass(name, fmt.Sprintf("%s: %s; %s fits with a %s-token context (the model's maximum is %s)",
		label, memory, fit.Model, humanize.Comma(int64(fit.Context)), humanize.Comma(int64(fit.ModelContext))))
}

func checkDocker(info DockerInfo, err error) Check {
	switch {
	case err != nil && permissionDenied(err):
		return fail(CheckDocker, oneLine(err.Error()), fixDockerGroup)
	case err != nil:
		return fail(CheckDocker, "the Docker Engine does not answer: "+oneLine(err.Error()),
			"install Docker Engine and start it: sudo systemctl enable --now docker")
	}
	return pass(CheckDocker, fmt.Sprintf("Docker Engine %s (API %s)", info.ServerVersion, info.APIVersion))
}

func (d *Doctor) checkNVIDIARuntime(info DockerInfo, err error) Check {
	if err != nil {
		return fail(CheckNVIDIARuntime, "the Docker Engine does not answer, so its runtimes are unknown", "fix the docker check first")
	}
	onWSL := d.WSL != nil && d.WSL.WSL2
	if onWSL && strings.Contains(info.OperatingSystem, "Docker Desktop") {
		// Docker Desktop's WSL 2 engine passes the GPUs (GPU
		// paravirtualization) to containers that ask with --gpus, as
		// Hearth's do, without a runtime of its own.
		return pass(CheckNVIDIARuntime, "Docker Desktop's WSL 2 engine passes the GPUs to containers (--gpus)")
	}
	if slices.Contains(info.Runtimes, "nvidia") {
		return pass(CheckNVIDIARuntime, "the nvidia runtime is registered with Docker")
	}
	var gpus []string
	for _, dev := range info.CDIDevices {
		if strings.HasPrefix(dev, "nvidia.com/gpu=") {
			gpus = append(gpus, dev)
		}
	}
	if len(gpus) > 0 {
		return pass(CheckNVIDIARuntime, "CDI devices: "+strings.Join(gpus, ", "))
	}
	runtimes := slices.Sorted(slices.Values(info.Runtimes))
	evidence := "no nvidia runtime (runtimes: " + strings.Join(runtimes, ", ") + ") and no NVIDIA CDI device"
	if len(info.CDISpecDirs) > 0 {
		evidence += " in " + strings.Join(info.CDISpecDirs, ", ")
	}
	if onWSL {
		return fail(CheckNVIDIARuntime, evidence, "install nvidia-container-toolkit inside the distribution (NVIDIA's CUDA on WSL guide; the driver stays the Windows one), then: "+
			"sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker; or use Docker Desktop with its WSL 2 engine and this distribution's WSL integration on")
	}
	return fail(CheckNVIDIARuntime, evidence, fixNVIDIARuntime)
}

func (d *Doctor) checkDeep(ctx context.Context, f GPUFacts, dockerErr error) Check {
	if dockerErr != nil {
		return fail(CheckDeepGPU, "the Docker Engine does not answer, so no container was started", "fix the docker check first")
	}
	image := d.DeepImage
	if image == "" && d.EngineImage != nil {
		image, _ = d.EngineImage(f.CUDAVersion)
	}
	if image == "" {
		return warn(CheckDeepGPU, "no image to start a container from", "name one: hearth doctor --deep --image IMAGE")
	}
	present, err := d.Docker.ImagePresent(ctx, image)
	switch {
	case err != nil:
		return warn(CheckDeepGPU, "looking for "+image+": "+oneLine(err.Error()), "fix the docker check first")
	case !present:
		return warn(CheckDeepGPU, "image "+image+" is not pulled, so no container was started",
			"pull it (docker pull "+image+", or let hearth up pull it), then run hearth doctor --deep again")
	}
	cmd := d.DeepCommand
	if cmd == nil {
		cmd = []string{"nvidia-smi", "-L"}
	}
	out, err := d.Docker.RunGPU(ctx, image, cmd)
	if err != nil {
		return fail(CheckDeepGPU, "a container of "+image+" asking for the GPUs failed: "+oneLine(err.Error()), fixNVIDIARuntime)
	}
	return pass(CheckDeepGPU, image+" sees: "+oneLine(out))
}

// checkDisk warns when dir has less than minFree bytes free, and on WSL2
// when it lies on a Windows drive (wslFix says what to do then).
func (d *Doctor) checkDisk(sys System, name, dir string, minFree uint64, fix, wslFix string) Check {
	if dir == "" {
		return warn(name, "no directory to check (HOME is not set)", "set HOME, or HF_HOME and hearth up --data-dir")
	}
	free, err := sys.DiskFree(dir)
	switch {
	case err != nil:
		return warn(name, oneLine(err.Error()), "check that "+dir+" or a parent of it can be read")
	case d.windowsDrive(dir):
		return warn(name, fmt.Sprintf("%s is on a Windows drive (%s free), read at 90-250 MB/s from WSL", dir, gib(free)), wslFix)
	case free < minFree:
		return warn(name, fmt.Sprintf("%s free at %s, under %s", gib(free), dir, gib(minFree)), fix)
	}
	return pass(name, fmt.Sprintf("%s free at %s", gib(free), dir))
}

func checkRAM(sys System, minRAM uint64) Check {
	avail, err := sys.MemAvailable()
	switch {
	case err != nil:
		return warn(CheckRAM, oneLine(err.Error()), "check that /proc/meminfo can be read")
	case avail < minRAM:
		return warn(CheckRAM, fmt.Sprintf("%s available, under %s for the RAM KV tier", gib(avail), gib(minRAM)),
			"close programs, or give each engine a smaller RAM tier (hearth up --kv-offloading-size)")
	}
	return pass(CheckRAM, gib(avail)+" available for the RAM KV tier")
}

func (d *Doctor) checkPort(sys System) Check {
	switch {
	case d.Addr == "":
		return warn(CheckAPIPort, "no API address to check", "pass the address hearth up --listen uses")
	case d.Serving:
		return pass(CheckAPIPort, "Hearth serves the API on "+d.Addr)
	}
	if err := sys.Listen(d.Addr); err != nil {
		return fail(CheckAPIPort, oneLine(err.Error()),
			"stop what listens on "+d.Addr+" (ss -ltnp shows it; a running hearth up holds it itself), or choose another address with hearth up --listen")
	}
	return pass(CheckAPIPort, d.Addr+" is free")
}

func (d *Doctor) checkMulticast(sys System) Check {
	names, err := sys.MulticastInterfaces()
	switch {
	case d.WSL != nil && d.WSL.WSL2 && d.WSL.NetworkingMode != wsl.Mirrored:
		return warn(CheckMulticast, "mDNS does not cross WSL's NAT: this node finds no peer on the LAN by itself",
			"name the cluster's nodes: hearth up --peer HOST (and peer = [\"HOST\"] in hearth.toml); see the wsl2 networking check")
	case len(names) == 0 && err != nil:
		return warn(CheckMulticast, oneLine(err.Error()), "LAN discovery needs a multicast interface; one machine alone does not")
	case len(names) == 0:
		return warn(CheckMulticast, "no up, non-loopback interface supports multicast",
			"connect to the LAN on an interface with multicast to find other nodes; one machine alone does not need it")
	case err != nil:
		return warn(CheckMulticast, "multicast interfaces "+strings.Join(names, ", ")+", but "+oneLine(err.Error()),
			"allow multicast (mDNS, UDP 5353) on the host firewall")
	}
	return pass(CheckMulticast, "multicast on "+strings.Join(names, ", ")+" (joined 224.0.0.251)")
}

func checkDataDir(sys System, dir string) Check {
	if dir == "" {
		return fail(CheckDataDir, "no data directory (HOME is not set)", "set HOME or pass hearth up --data-dir")
	}
	if err := sys.ProbeWrite(dir); err != nil {
		return fail(CheckDataDir, oneLine(err.Error()),
			"make it writable (sudo chown -R $USER "+dir+"), or choose another with hearth up --data-dir")
	}
	return pass(CheckDataDir, dir+" is writable")
}
