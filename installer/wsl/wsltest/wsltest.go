// Package wsltest builds fake WSL2 roots: a directory laid out as a WSL2
// distribution shows itself (the kernel's osrelease, the Windows driver's
// /usr/lib/wsl/lib, /etc/wsl.conf, /proc/meminfo, the Windows user's
// .wslconfig under /mnt/c/Users, and a wslinfo that answers
// --networking-mode), for wsl.Detect and everything that asks it.
//
// The NVML in the fake /usr/lib/wsl/lib is a stand-in file: a test that
// reads GPUs opens it through nodes/nvmltest's mock NVML, as the
// discovery of a real machine opens the driver's.
package wsltest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Root describes a fake WSL2 root. Its zero value is a WSL2 distribution
// under NAT (told by wslinfo) with the driver's libraries, no systemd
// and 32 GiB of memory.
type Root struct {
	// Kernel is the osrelease; "" is a WSL2 kernel.
	Kernel string
	// NoDriver leaves /usr/lib/wsl/lib empty; LinuxDriver also installs
	// a Linux driver's NVML in /usr/lib/x86_64-linux-gnu.
	NoDriver, LinuxDriver bool
	// WSLInfo is what wslinfo --networking-mode prints; "" is "nat", and
	// "-" leaves wslinfo out (older WSL).
	WSLInfo string
	// WSLConfig is the Windows user's .wslconfig, "" for none.
	WSLConfig string
	// WSLConf is /etc/wsl.conf, "" for none.
	WSLConf string
	// MemTotalGiB is /proc/meminfo's MemTotal; 0 is 32.
	MemTotalGiB int
}

// Build writes the root under a temporary directory and returns it.
func (r Root) Build(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	kernel := r.Kernel
	if kernel == "" {
		kernel = "6.6.87.2-microsoft-standard-WSL2"
	}
	write("/proc/sys/kernel/osrelease", kernel+"\n", 0o644)
	mem := r.MemTotalGiB
	if mem == 0 {
		mem = 32
	}
	write("/proc/meminfo", fmt.Sprintf("MemTotal:       %d kB\nMemAvailable:   %d kB\n", mem<<20, mem<<19), 0o644)
	if !r.NoDriver {
		write("/usr/lib/wsl/lib/libnvidia-ml.so.1", "stand-in: opened through nodes/nvmltest\n", 0o755)
		write("/usr/lib/wsl/lib/libcuda.so.1", "stand-in\n", 0o755)
		write("/usr/lib/wsl/lib/nvidia-smi", "#!/bin/sh\nexit 9\n", 0o755)
	}
	if r.LinuxDriver {
		write("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "a Linux driver's NVML\n", 0o755)
	}
	switch r.WSLInfo {
	case "-":
	case "":
		write("/usr/bin/wslinfo", "#!/bin/sh\n[ \"$1\" = --networking-mode ] && echo nat\n", 0o755)
	default:
		write("/usr/bin/wslinfo", "#!/bin/sh\n[ \"$1\" = --networking-mode ] && echo "+r.WSLInfo+"\n", 0o755)
	}
	if r.WSLConfig != "" {
		write("/mnt/c/Users/gamer/.wslconfig", r.WSLConfig, 0o644)
	}
	if r.WSLConf != "" {
		write("/etc/wsl.conf", r.WSLConf, 0o644)
	}
	return dir
}
