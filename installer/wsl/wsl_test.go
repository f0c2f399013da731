package wsl_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/installer/wsl/wsltest"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	const mirrored = "[wsl2]\nmemory=48GB\nnetworkingMode=mirrored # since 22H2\n"
	tests := []struct {
		name  string
		root  wsltest.Root
		check func(t *testing.T, root string, f wsl.Facts)
	}{
		{"a plain Linux is not WSL2", wsltest.Root{Kernel: "6.12.48+deb13-amd64"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.WSL2 || f.NVMLPath != "" || f.PinnedLimit() != 0 {
				t.Errorf("facts = %+v, want not WSL2", f)
			}
		}},
		{"WSL1 is not WSL2", wsltest.Root{Kernel: "4.4.0-19041-Microsoft"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.WSL2 {
				t.Errorf("facts = %+v, want not WSL2", f)
			}
		}},
		{"the driver's libraries under /usr/lib/wsl/lib", wsltest.Root{}, func(t *testing.T, root string, f wsl.Facts) {
			if !f.WSL2 || f.KernelRelease != "6.6.87.2-microsoft-standard-WSL2" {
				t.Errorf("facts = %+v, want WSL2", f)
			}
			if want := filepath.Join(root, wsl.LibDir, "libnvidia-ml.so.1"); f.NVMLPath != want {
				t.Errorf("NVMLPath = %q, want %q", f.NVMLPath, want)
			}
			if want := filepath.Join(root, wsl.LibDir, "nvidia-smi"); f.SMIPath != want {
				t.Errorf("SMIPath = %q, want %q", f.SMIPath, want)
			}
			if f.LinuxDriver != "" {
				t.Errorf("LinuxDriver = %q, want none", f.LinuxDriver)
			}
		}},
		{"no Windows driver", wsltest.Root{NoDriver: true}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NVMLPath != "" || f.SMIPath != "" {
				t.Errorf("facts = %+v, want no driver", f)
			}
		}},
		{"a Linux driver inside WSL", wsltest.Root{LinuxDriver: true}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.LinuxDriver != "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" {
				t.Errorf("LinuxDriver = %q", f.LinuxDriver)
			}
		}},
		{"wslinfo says NAT", wsltest.Root{}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NetworkingMode != wsl.NAT || f.NetworkingFrom != "wslinfo --networking-mode" {
				t.Errorf("networking = %q from %q", f.NetworkingMode, f.NetworkingFrom)
			}
		}},
		{"wslinfo wins over .wslconfig (Windows fell back to NAT)", wsltest.Root{WSLConfig: mirrored}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NetworkingMode != wsl.NAT || f.WSLConfig != "/mnt/c/Users/gamer/.wslconfig" {
				t.Errorf("networking = %q, config %q", f.NetworkingMode, f.WSLConfig)
			}
		}},
		{".wslconfig without wslinfo", wsltest.Root{WSLInfo: "-", WSLConfig: mirrored}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NetworkingMode != wsl.Mirrored || f.NetworkingFrom != "/mnt/c/Users/gamer/.wslconfig" || !f.HyperVFirewall {
				t.Errorf("facts = %+v", f)
			}
		}},
		{".wslconfig without networkingMode is NAT", wsltest.Root{WSLInfo: "-", WSLConfig: "[wsl2]\nmemory=8GB\n"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NetworkingMode != wsl.NAT {
				t.Errorf("networking = %q", f.NetworkingMode)
			}
		}},
		{"no way to tell", wsltest.Root{WSLInfo: "-"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.NetworkingMode != "" {
				t.Errorf("networking = %q, want unknown", f.NetworkingMode)
			}
		}},
		{"Hyper-V firewall off", wsltest.Root{WSLInfo: "mirrored", WSLConfig: "[wsl2]\nnetworkingMode=Mirrored\nfirewall=false\n"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.HyperVFirewall || f.NetworkingMode != wsl.Mirrored {
				t.Errorf("facts = %+v", f)
			}
		}},
		{"systemd and memory", wsltest.Root{WSLConf: "[boot]\nsystemd=true\n", MemTotalGiB: 64}, func(t *testing.T, _ string, f wsl.Facts) {
			if !f.Systemd || f.MemTotal != 64<<30 || f.PinnedLimit() != 32<<30 {
				t.Errorf("facts = %+v, pinned %d", f, f.PinnedLimit())
			}
		}},
		{"systemd off", wsltest.Root{WSLConf: "[boot]\nsystemd=false\n[network]\nhostname=rig\n"}, func(t *testing.T, _ string, f wsl.Facts) {
			if f.Systemd {
				t.Errorf("facts = %+v", f)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := tt.root.Build(t)
			tt.check(t, root, wsl.Detect(context.Background(), root))
		})
	}
}

func TestOnWindowsDrive(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/mnt/c/Users/gamer/hf": true, "/mnt/d": true, "/mnt/wsl/shared": false, "/mnt/cdrom": false,
		"/home/gamer/.cache/huggingface": false, "/mnt/c/../../home": false,
	} {
		if got := wsl.OnWindowsDrive(path); got != want {
			t.Errorf("OnWindowsDrive(%q) = %v, want %v", path, got, want)
		}
	}
}
