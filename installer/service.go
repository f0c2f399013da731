package installer

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Where an installed Hearth lives. These are the paths on the target
// system; Layout.Path puts them under a packaging root.
const (
	BinPath     = "/usr/local/bin/hearth"
	ConfigDir   = "/etc/hearth"
	ConfigPath  = "/etc/hearth/hearth.toml"
	DataDir     = "/var/lib/hearth"
	UnitPath    = "/etc/systemd/system/hearth.service"
	ServiceName = "hearth.service"
	// ServiceUser is the system user (and its group) the daemon runs as;
	// DockerGroup lets it reach the Docker socket.
	ServiceUser = "hearth"
	DockerGroup = "docker"
	// HFCacheDir is the Hugging Face cache of the service: ProtectHome
	// hides every home directory, so the cache lives with the data.
	HFCacheDir = DataDir + "/huggingface"
)

// Layout places the installed files: under Root ("" is the system's
// root), as a package build or a test wants them.
type Layout struct {
	Root string
}

// Path is p, an absolute path on the target system, under the layout's
// root.
func (l Layout) Path(p string) string {
	if l.Root == "" {
		return p
	}
	return filepath.Join(l.Root, p)
}

// PrevBinPath is where an upgrade keeps the binary it replaced, for a
// rollback.
const PrevBinPath = BinPath + ".prev"

// ServiceConfig is the values the installed configuration file sets for
// the service (the rest stay commented defaults): the data directory the
// unit makes writable, the Hugging Face cache inside it, real GPUs served
// by vLLM in containers, and engines kept running across restarts so that
// a restart or an upgrade adopts them instead of reloading their weights.
// (hearth up leaves engine and keep-engines from the file unused when the
// file, or HEARTH_SIM, also sets sim: they are for real GPUs.)
func ServiceConfig() map[string][]string {
	return map[string][]string{
		"data-dir":     {DataDir},
		"hf-cache":     {HFCacheDir},
		"engine":       {"vllm"},
		"keep-engines": {"true"},
	}
}

// StopTimeoutSec is how long systemd waits for the daemon to stop before it
// kills it: longer than hearth up's own --stop-timeout (30 s) for its
// engines, plus the time it takes to close everything else.
const StopTimeoutSec = 90

// Unit is the systemd unit of the service. The daemon runs as ServiceUser,
// with the docker group when withDockerGroup (systemd refuses to start a
// service whose SupplementaryGroups names a group that does not exist:
// status=216/GROUP), sees the file system read-only but for its data
// directory (ProtectSystem=strict), no home directories and a private
// /tmp. Devices stay visible: the engines need /dev/nvidia*. KillMode=mixed
// sends SIGTERM to the daemon alone, which stops its engines itself, and
// only the leftovers are killed at the timeout.
func Unit(withDockerGroup bool) string {
	groups := ""
	if withDockerGroup {
		groups = "SupplementaryGroups=" + DockerGroup + "\n"
	}
	var b strings.Builder
	b.WriteString(`[Unit]
Description=Hearth: coding agents served from this machine's GPUs
Documentation=https://github.com/hearth-llm/hearth/blob/main/docs/install.md
Wants=network-online.target
After=network-online.target docker.service

[Service]
Type=simple
User=` + ServiceUser + `
Group=` + ServiceUser + `
` + groups + `ExecStart=` + BinPath + ` up --config ` + ConfigPath + `
StateDirectory=hearth
StateDirectoryMode=0750
ReadWritePaths=` + DataDir + `
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
LockPersonality=yes
ProtectClock=yes
ProtectHostname=yes
ProtectKernelLogs=yes
RestrictRealtime=yes
SystemCallArchitectures=native
CapabilityBoundingSet=
UMask=0027
Restart=on-failure
RestartSec=5s
KillMode=mixed
TimeoutStopSec=`)
	b.WriteString(strconv.Itoa(StopTimeoutSec))
	b.WriteString(`s
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`)
	return b.String()
}
