package wsl

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// LibDir is where WSL2 maps the Windows driver's Linux libraries and
// nvidia-smi.
const LibDir = "/usr/lib/wsl/lib"

// PinMemoryEnv is the variable under which vLLM pins host memory in WSL.
const PinMemoryEnv = "VLLM_WSL2_ENABLE_PIN_MEMORY"

// HyperVCreatorID names WSL's virtual machines to the Hyper-V firewall.
const HyperVCreatorID = "{40E0AC32-46A5-438A-A0B2-2B479E8F2E90}"

// Networking modes, as wslinfo --networking-mode and .wslconfig spell
// them (lower-cased).
const (
	NAT      = "nat"
	Mirrored = "mirrored"
)

// Facts is what Detect found. Its zero value is a machine that is not
// WSL2.
type Facts struct {
	// WSL2 says the kernel is WSL2's; KernelRelease is its osrelease.
	WSL2          bool
	KernelRelease string
	// NVMLPath and SMIPath are the Windows driver's libnvidia-ml.so.1 and
	// nvidia-smi under LibDir, as paths on this machine (under the root);
	// "" when absent.
	NVMLPath, SMIPath string
	// LinuxDriver is a Linux driver's libnvidia-ml.so.1 installed inside
	// the distribution (which must not be), "" when there is none.
	LinuxDriver string
	// NetworkingMode is NAT, Mirrored, another mode WSL names, or ""
	// when it could not be learnt; NetworkingFrom says from where
	// ("wslinfo", or the .wslconfig read).
	NetworkingMode, NetworkingFrom string
	// WSLConfig is the Windows user's .wslconfig read ("" when none was
	// found); HyperVFirewall is its [wsl2] firewall setting (true, the
	// default, when it does not say).
	WSLConfig      string
	HyperVFirewall bool
	// Systemd says /etc/wsl.conf has [boot] systemd=true.
	Systemd bool
	// MemTotal is the memory of the WSL2 VM (/proc/meminfo), 0 when
	// unknown.
	MemTotal uint64
}

// PinnedLimit is about how much host memory CUDA can pin in this VM:
// half of its memory, 0 when that is unknown or this is not WSL2.
func (f Facts) PinnedLimit() uint64 {
	if !f.WSL2 {
		return 0
	}
	return f.MemTotal / 2
}

// Detect reads the WSL facts of the system under root ("" or "/": this
// machine). It never fails: what cannot be read is left unknown.
func Detect(ctx context.Context, root string) Facts {
	if root == "" {
		root = "/"
	}
	at := func(p string) string { return filepath.Join(root, p) }
	release, _ := os.ReadFile(at("/proc/sys/kernel/osrelease"))
	f := Facts{KernelRelease: strings.TrimSpace(string(release))}
	f.WSL2 = IsWSL2Kernel(f.KernelRelease)
	if !f.WSL2 {
		return f
	}
	if p := at(LibDir + "/libnvidia-ml.so.1"); exists(p) {
		f.NVMLPath = p
	}
	if p := at(LibDir + "/nvidia-smi"); exists(p) {
		f.SMIPath = p
	}
	f.LinuxDriver = linuxDriver(root)
	if conf, err := os.ReadFile(at("/etc/wsl.conf")); err == nil {
		f.Systemd = strings.EqualFold(iniValue(conf, "boot", "systemd"), "true")
	}
	f.MemTotal = memTotal(at("/proc/meminfo"))

	f.HyperVFirewall = true
	if path, conf := windowsConfig(root); path != "" {
		f.WSLConfig = path
		if v := iniValue(conf, "wsl2", "firewall"); v != "" {
			f.HyperVFirewall = !strings.EqualFold(v, "false")
		}
		if v := iniValue(conf, "wsl2", "networkingMode"); v != "" {
			f.NetworkingMode, f.NetworkingFrom = strings.ToLower(v), path
		} else {
			f.NetworkingMode, f.NetworkingFrom = NAT, path+" (no networkingMode: NAT, the default)"
		}
	}
	// wslinfo reports the mode WSL actually started with, which differs
	// from .wslconfig's when Windows fell back to NAT.
	if mode := wslinfoMode(ctx, at("/usr/bin/wslinfo")); mode != "" {
		f.NetworkingMode, f.NetworkingFrom = mode, "wslinfo --networking-mode"
	}
	return f
}

// IsWSL2Kernel reports whether a kernel release is WSL2's
// ("6.6.87.2-microsoft-standard-WSL2").
func IsWSL2Kernel(release string) bool {
	r := strings.ToLower(release)
	return strings.Contains(r, "microsoft") && strings.Contains(r, "wsl2")
}

var windowsDrive = regexp.MustCompile(`^/mnt/[a-zA-Z](/|$)`)

// OnWindowsDrive reports whether path lies on a Windows drive that WSL
// mounts under /mnt (/mnt/c/...), reached over 9P.
func OnWindowsDrive(path string) bool { return windowsDrive.MatchString(filepath.Clean(path)) }

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// linuxDriver finds a libnvidia-ml.so.1 that a Linux driver package put in
// the distribution's library directories: one that is not a link into
// LibDir.
func linuxDriver(root string) string {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		p := filepath.Join(root, dir, "libnvidia-ml.so.1")
		if !exists(p) {
			continue
		}
		if target, err := filepath.EvalSymlinks(p); err == nil {
			rel, err := filepath.Rel(filepath.Join(root, LibDir), target)
			if err == nil && !strings.HasPrefix(rel, "..") {
				continue
			}
		}
		return filepath.Join(dir, "libnvidia-ml.so.1")
	}
	return ""
}

// windowsConfig reads the first %UserProfile%\.wslconfig found under
// /mnt/c/Users; the path returned is as seen in the distribution.
func windowsConfig(root string) (string, []byte) {
	matches, _ := filepath.Glob(filepath.Join(root, "/mnt/c/Users/*/.wslconfig"))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			rel, _ := filepath.Rel(root, m)
			return "/" + filepath.ToSlash(rel), b
		}
	}
	return "", nil
}

// wslinfoMode runs wslinfo --networking-mode, "" when it is not there or
// says nothing usable.
func wslinfoMode(ctx context.Context, path string) string {
	if !exists(path) {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--networking-mode").Output()
	if err != nil {
		return ""
	}
	mode := strings.ToLower(strings.TrimSpace(string(out)))
	if mode == "" || strings.ContainsAny(mode, " \t\n") {
		return ""
	}
	return mode
}

// iniValue is key's value in section of a WSL configuration file (INI:
// "[section]" lines, "key = value" lines, # and ; comments); "" when
// absent. Names compare without case, as WSL's parser does.
func iniValue(conf []byte, section, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(conf))
	in := false
	value := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = strings.EqualFold(strings.TrimSpace(line[1:len(line)-1]), section)
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if in && ok && strings.EqualFold(strings.TrimSpace(k), key) {
			value = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return value
}

func memTotal(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb > 1<<53 {
			return 0
		}
		return kb << 10
	}
	return 0
}
