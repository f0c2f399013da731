package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/installer/wsl"
)

// The checks of a WSL2 host (Doctor.WSL set and WSL2).
const (
	CheckWSL         = "wsl2"
	CheckWSLNetwork  = "wsl2 networking"
	CheckWSLFirewall = "wsl2 firewall"
	CheckWSLSystemd  = "wsl2 systemd"
	CheckWSLPinned   = "wsl2 pinned memory"
)

// fixWindowsDriver is what a WSL2 host without the Windows driver's
// libraries does.
const fixWindowsDriver = "install the NVIDIA driver for Windows (R580 or newer), not a Linux one: WSL2 maps it into " + wsl.LibDir +
	"; then run wsl --shutdown in Windows and start the distribution again"

// wslChecks are the checks only a WSL2 host has: the driver's libraries,
// how the LAN reaches the distribution, the Hyper-V firewall, systemd for
// the service, and the pinned-memory limit the RAM KV tier is sized to.
func (d *Doctor) wslChecks() []Check {
	f := d.WSL
	return []Check{checkWSLDriver(f), checkWSLNetwork(f, d.ports()), checkWSLFirewall(f, d.ports()), checkWSLSystemd(f), checkWSLPinned(f)}
}

// ports are the TCP ports other machines must reach: the API's and the
// cluster's.
func (d *Doctor) ports() []int {
	var ports []int
	if p := portOf(d.Addr); p > 0 {
		ports = append(ports, p)
	}
	return append(ports, d.ClusterPorts...)
}

func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0
	}
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func checkWSLDriver(f *wsl.Facts) Check {
	switch {
	case f.LinuxDriver != "":
		return fail(CheckWSL, "WSL2 ("+f.KernelRelease+") with a Linux driver's "+f.LinuxDriver+" installed inside it",
			"remove the Linux driver from the distribution (sudo apt-get purge 'nvidia-*' 'libnvidia-*'); the Windows driver's libraries in "+wsl.LibDir+" are the ones to use")
	case f.NVMLPath == "":
		return fail(CheckWSL, "WSL2 ("+f.KernelRelease+") without libnvidia-ml.so.1 in "+wsl.LibDir, fixWindowsDriver)
	}
	return pass(CheckWSL, "WSL2 ("+f.KernelRelease+"): NVML is the Windows driver's, in "+wsl.LibDir)
}

// checkWSLNetwork fails under NAT: the LAN cannot reach a service inside
// the distribution, nor does mDNS cross it, so the rig cannot be a cluster
// node until mirrored mode or a port proxy lets it in.
func checkWSLNetwork(f *wsl.Facts, ports []int) Check {
	list := joinPorts(ports)
	mirror := `on Windows, put "[wsl2]" and "networkingMode=mirrored" in %UserProfile%\.wslconfig (Windows 11 22H2 or newer), run wsl --shutdown, ` +
		"and allow the ports in PowerShell as administrator: New-NetFirewallHyperVRule -Name Hearth -DisplayName Hearth -Direction Inbound -VMCreatorId '" +
		wsl.HyperVCreatorID + "' -Protocol TCP -LocalPorts " + list
	proxy := "; or keep NAT and forward each port in PowerShell as administrator: "
	for i, p := range ports {
		if i > 0 {
			proxy += "; "
		}
		proxy += fmt.Sprintf("netsh interface portproxy add v4tov4 listenport=%d listenaddress=0.0.0.0 connectport=%d connectaddress=<the address hostname -I prints in WSL>", p, p)
	}
	proxy += "; New-NetFirewallRule -DisplayName Hearth -Direction Inbound -Protocol TCP -LocalPort " + list +
		" -Action Allow; then hearth up --advertise-host <the Windows machine's LAN address> --peer <another node>"
	switch f.NetworkingMode {
	case wsl.Mirrored:
		return pass(CheckWSLNetwork, "mirrored networking ("+f.NetworkingFrom+"): the LAN reaches this distribution; mDNS is unreliable here, so name peers with --peer")
	case wsl.NAT:
		return fail(CheckWSLNetwork, "NAT networking ("+f.NetworkingFrom+"): other machines cannot reach Hearth inside WSL, and mDNS does not cross the NAT",
			mirror+proxy)
	case "":
		return warn(CheckWSLNetwork, "WSL's networking mode is unknown (no wslinfo, no .wslconfig under /mnt/c/Users): NAT unless set", mirror+proxy)
	}
	return warn(CheckWSLNetwork, f.NetworkingMode+" networking ("+f.NetworkingFrom+"): Hearth is tested with mirrored networking only", mirror)
}

// checkWSLFirewall: the Hyper-V firewall's rules live in Windows, out of
// the distribution's sight; only .wslconfig's firewall=false is visible.
func checkWSLFirewall(f *wsl.Facts, ports []int) Check {
	rule := "allow the ports once, in PowerShell as administrator: New-NetFirewallHyperVRule -Name Hearth -DisplayName Hearth -Direction Inbound -VMCreatorId '" +
		wsl.HyperVCreatorID + "' -Protocol TCP -LocalPorts " + joinPorts(ports) + " (Get-NetFirewallHyperVRule -Name Hearth shows it)"
	switch {
	case f.NetworkingMode != wsl.Mirrored:
		return warn(CheckWSLFirewall, "with NAT, Windows Defender Firewall guards the forwarded ports", "fix the wsl2 networking check first; its fix opens the ports")
	case !f.HyperVFirewall:
		return pass(CheckWSLFirewall, "the Hyper-V firewall is off for WSL (firewall=false in "+f.WSLConfig+")")
	}
	return warn(CheckWSLFirewall, "the Hyper-V firewall filters inbound traffic to WSL, and its rules cannot be read from inside the distribution", rule)
}

func checkWSLSystemd(f *wsl.Facts) Check {
	if f.Systemd {
		return pass(CheckWSLSystemd, "systemd runs ([boot] systemd=true in /etc/wsl.conf): hearth install can run Hearth as a service")
	}
	return warn(CheckWSLSystemd, "systemd is off in this distribution, so hearth install has no service manager and Docker Engine does not start by itself",
		`add "[boot]" and "systemd=true" to /etc/wsl.conf, then run wsl --shutdown in Windows and start the distribution again`)
}

func checkWSLPinned(f *wsl.Facts) Check {
	if f.MemTotal == 0 {
		return warn(CheckWSLPinned, "the WSL2 VM's memory is unknown, so is the pinned-memory limit", "check that /proc/meminfo can be read")
	}
	return pass(CheckWSLPinned, fmt.Sprintf("CUDA pins at most about %s here (half the VM's %s): the RAM KV tier is sized to it, and vLLM runs with %s=1",
		gib(f.PinnedLimit()), gib(f.MemTotal), wsl.PinMemoryEnv))
}

// windowsDrive reports whether dir lies on a Windows drive of a WSL2
// host, reached over 9P.
func (d *Doctor) windowsDrive(dir string) bool {
	return d.WSL != nil && d.WSL.WSL2 && wsl.OnWindowsDrive(dir)
}
