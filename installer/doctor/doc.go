// Package doctor holds the checks a host must pass before Hearth can serve
// from its GPUs: those of `hearth doctor` and of the console's Health page
// (driver, NVML, CUDA against the engine image, each GPU's free memory
// against the planned model, Docker and its NVIDIA runtime, disks, RAM,
// the API port, multicast, the data directory).
//
// A Doctor runs the checks and returns them in a fixed order, each a
// Check: a name, a Status (pass, warn or fail), one line of evidence and,
// unless it passed, one line saying how to fix it. ExitCode turns a list
// of checks into the command's exit status: 0 when all pass, 1 when any
// fails, 2 for warnings only.
//
// On WSL2 (Doctor.WSL, from package installer/wsl, the one Hearth package
// it imports: it reads files only) it adds the checks of a gaming rig:
// the Windows driver's libraries, the networking mode (NAT fails, with the
// Windows-side commands as its fix), the Hyper-V firewall, systemd and
// the pinned-memory limit; it warns for a cache or KV tier on a Windows
// drive, and accepts Docker Desktop's GPU support.
//
// It imports no other Hearth package. It reads the GPUs, the
// Docker Engine and the planned model through the small interfaces it
// declares (GPUSource, DockerSource, Fitter); package daemon writes the
// adapters over nodes, the moby client and catalog. What it reads of a GPU
// is GPUMemory, the few facts the checks weigh, not a GPU value of its
// own: nodes.GPU is the GPU, and importing nodes would pull NVML into the
// doctor. The host itself (disk, RAM, ports, interfaces, the data
// directory) is read through System, whose HostSystem reads the real
// machine. Errors a source returns are classified with errors.Is:
// ErrNoDriver (no NVIDIA driver at all, as opposed to a driver whose NVML
// failed) and fs.ErrPermission (the Docker socket refused this user).
//
// Memory held by Hearth's own engines counts as available on a GPU
// (GPUMemory.HearthBytes): a running daemon must not flag its own engines.
// How those bytes are found is the adapter's business.
//
// It must not be imported by the daemon's request path: checks take
// seconds (--deep starts a container) and the daemon caches their result.
package doctor
