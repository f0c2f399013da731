// Package installer holds what a one-command install needs: the checks a
// host must pass before Hearth can serve from its GPUs (`hearth doctor`, the
// console's Health page), and the install itself: the configuration file
// of hearth up, the systemd unit, install, upgrade and uninstall.
//
// A Doctor runs the checks and returns them in a fixed order, each a
// Check: a name, a Status (pass, warn or fail), one line of evidence and,
// unless it passed, one line saying how to fix it. ExitCode turns a list
// of checks into the command's exit status: 0 when all pass, 1 when any
// fails, 2 for warnings only.
//
// The package imports no other Hearth package. It reads the GPUs, the
// Docker Engine and the planned model through the small interfaces it
// declares (GPUSource, DockerSource, Fitter); cmd/hearth writes the
// adapters over nodes, the moby client and catalog. The host itself (disk,
// RAM, ports, interfaces, the data directory) is read through System,
// whose HostSystem reads the real machine. Errors a source returns are
// classified with errors.Is: ErrNoDriver (no NVIDIA driver at all, as
// opposed to a driver whose NVML failed) and fs.ErrPermission (the Docker
// socket refused this user).
//
// Memory held by Hearth's own engines counts as available on a GPU
// (GPU.HearthBytes): a running daemon must not flag its own engines. How
// those bytes are found is the adapter's business.
//
// The configuration file is TOML whose keys are hearth up's flag names.
// ApplyConfig fills the flags the command line left unset, from HEARTH_*
// variables (EnvName) and else the file, and returns each flag's Setting
// (value and Source); ConfigTemplate writes the commented file from the
// flag set itself, so it lists every flag there is.
//
// An Installer writes its files under a Layout (a packaging root, or /)
// and does everything else (useradd, chown, systemctl) through a Host:
// SystemHost runs the commands, PrintHost only prints them, tests record
// them. Files are replaced atomically (a synced temporary file renamed
// over the old). Upgrade keeps the replaced binary as hearth.prev and
// renames it back when the restarted service does not answer its health
// URL (ErrRolledBack). install.sh is the one-line install that fetches a
// release archive (or uses go install) and runs hearth install.
//
// It must not be imported by the daemon's request path: checks take
// seconds (--deep starts a container) and the daemon caches their result.
package installer
