package doctor

import (
	"context"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/installer/wsl/wsltest"
)

// onWSL returns a healthy Doctor on the fake WSL2 root r.
func onWSL(t *testing.T, r wsltest.Root) (*Doctor, *fakeDocker, *fakeSystem) {
	t.Helper()
	d, _, dock, sys := healthy()
	facts := wsl.Detect(context.Background(), r.Build(t))
	d.WSL, d.ClusterPorts = &facts, []int{7443, 7422}
	return d, dock, sys
}

func TestWSLChecks(t *testing.T) {
	t.Parallel()
	mirroredOpen := wsltest.Root{WSLInfo: "mirrored", WSLConfig: "[wsl2]\nnetworkingMode=mirrored\nfirewall=false\n", WSLConf: "[boot]\nsystemd=true\n"}
	cases := []struct {
		name   string
		root   wsltest.Root
		change func(*Doctor, *fakeDocker, *fakeSystem)
		check  string
		status Status
		// evidence and fix must contain each of these.
		evidence, fix []string
	}{
		{"recognises WSL2 and the driver's NVML", wsltest.Root{}, nil, CheckWSL, Pass,
			[]string{"WSL2 (6.6.87.2-microsoft-standard-WSL2)", "/usr/lib/wsl/lib"}, nil},
		{"no Windows driver", wsltest.Root{NoDriver: true}, nil, CheckWSL, Fail,
			[]string{"without libnvidia-ml.so.1 in /usr/lib/wsl/lib"}, []string{"NVIDIA driver for Windows", "not a Linux one"}},
		{"a Linux driver inside WSL", wsltest.Root{LinuxDriver: true}, nil, CheckWSL, Fail,
			[]string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}, []string{"remove the Linux driver"}},
		{"NAT fails with the Windows-side commands", wsltest.Root{}, nil, CheckWSLNetwork, Fail,
			[]string{"NAT networking (wslinfo --networking-mode)", "cannot reach"},
			[]string{`%UserProfile%\.wslconfig`, "networkingMode=mirrored", "wsl --shutdown",
				"New-NetFirewallHyperVRule -Name Hearth -DisplayName Hearth -Direction Inbound -VMCreatorId '{40E0AC32-46A5-438A-A0B2-2B479E8F2E90}' -Protocol TCP -LocalPorts 8000,7443,7422",
				"netsh interface portproxy add v4tov4 listenport=7443 listenaddress=0.0.0.0 connectport=7443",
				"netsh interface portproxy add v4tov4 listenport=7422", "netsh interface portproxy add v4tov4 listenport=8000",
				"New-NetFirewallRule -DisplayName Hearth -Direction Inbound -Protocol TCP -LocalPort 8000,7443,7422 -Action Allow",
				"--advertise-host", "--peer"}},
		{"mirrored passes", mirroredOpen, nil, CheckWSLNetwork, Pass, []string{"mirrored networking", "--peer"}, nil},
		{"unknown mode warns", wsltest.Root{WSLInfo: "-"}, nil, CheckWSLNetwork, Warn, []string{"unknown"}, []string{"networkingMode=mirrored"}},
		{"mirrored with the Hyper-V firewall on warns with its rule", wsltest.Root{WSLInfo: "mirrored"}, nil, CheckWSLFirewall, Warn,
			[]string{"Hyper-V firewall"}, []string{"New-NetFirewallHyperVRule", "-LocalPorts 8000,7443,7422"}},
		{"mirrored with the Hyper-V firewall off passes", mirroredOpen, nil, CheckWSLFirewall, Pass, []string{"firewall=false in /mnt/c/Users/gamer/.wslconfig"}, nil},
		{"systemd off warns", wsltest.Root{}, nil, CheckWSLSystemd, Warn, []string{"systemd is off"}, []string{"/etc/wsl.conf", "systemd=true"}},
		{"systemd on passes", mirroredOpen, nil, CheckWSLSystemd, Pass, []string{"systemd=true"}, nil},
		{"the pinned-memory limit", wsltest.Root{MemTotalGiB: 48}, nil, CheckWSLPinned, Pass,
			[]string{"24.0 GiB here (half the VM's 48.0 GiB)", "VLLM_WSL2_ENABLE_PIN_MEMORY=1"}, nil},
		{"an HF cache on /mnt/c warns", wsltest.Root{}, func(d *Doctor, _ *fakeDocker, s *fakeSystem) {
			d.HFCacheDir = "/mnt/c/Users/gamer/hf"
			s.diskFree[d.HFCacheDir] = 900 * gb
		}, CheckHFCacheDisk, Warn, []string{"/mnt/c/Users/gamer/hf is on a Windows drive", "90-250 MB/s"}, []string{"HF_HOME=$HOME/.cache/huggingface"}},
		{"a KV tier on /mnt/d warns", wsltest.Root{}, func(d *Doctor, _ *fakeDocker, s *fakeSystem) {
			d.KVDir = "/mnt/d/hearth/kv"
			s.diskFree[d.KVDir] = 900 * gb
		}, CheckKVDisk, Warn, []string{"/mnt/d/hearth/kv is on a Windows drive"}, []string{"--data-dir"}},
		{"an HF cache on ext4 passes", wsltest.Root{}, nil, CheckHFCacheDisk, Pass, []string{"500.0 GiB free at /hf"}, nil},
		{"multicast under NAT warns towards --peer", wsltest.Root{}, nil, CheckMulticast, Warn, []string{"does not cross WSL's NAT"}, []string{"hearth up --peer HOST"}},
		{"Docker Desktop's GPU support", wsltest.Root{}, func(_ *Doctor, dock *fakeDocker, _ *fakeSystem) {
			dock.info.Runtimes, dock.info.OperatingSystem = []string{"runc"}, "Docker Desktop"
		}, CheckNVIDIARuntime, Pass, []string{"Docker Desktop's WSL 2 engine"}, nil},
		{"Docker Engine in WSL without the toolkit", wsltest.Root{}, func(_ *Doctor, dock *fakeDocker, _ *fakeSystem) {
			dock.info.Runtimes, dock.info.OperatingSystem = []string{"runc"}, "Ubuntu 24.04.3 LTS"
		}, CheckNVIDIARuntime, Fail, []string{"no nvidia runtime"}, []string{"nvidia-container-toolkit inside the distribution", "Docker Desktop"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, dock, sys := onWSL(t, tc.root)
			if tc.change != nil {
				tc.change(d, dock, sys)
			}
			checks := d.Check(context.Background())
			c := byName(t, checks, tc.check)
			if c.Status != tc.status {
				t.Fatalf("%s: %+v, want %s", tc.check, c, tc.status)
			}
			for _, e := range tc.evidence {
				if !strings.Contains(c.Evidence, e) {
					t.Errorf("evidence %q lacks %q", c.Evidence, e)
				}
			}
			for _, f := range tc.fix {
				if !strings.Contains(c.Fix, f) {
					t.Errorf("fix %q lacks %q", c.Fix, f)
				}
			}
			if (c.Status == Pass) != (c.Fix == "") || strings.Contains(c.Evidence+c.Fix, "\n") {
				t.Errorf("%+v: want one line, and a fix exactly when it did not pass", c)
			}
		})
	}
}

// TestNotWSLAddsNoWSLCheck: a plain Linux host's checks stay as they were.
func TestNotWSLAddsNoWSLCheck(t *testing.T) {
	t.Parallel()
	d, _, _ := onWSL(t, wsltest.Root{Kernel: "6.12.48+deb13-amd64"})
	for _, c := range d.Check(context.Background()) {
		if strings.HasPrefix(c.Name, "wsl2") || c.Status != Pass {
			t.Errorf("%+v on a host that is not WSL2", c)
		}
	}
}

func byName(t *testing.T, checks []Check, name string) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return Check{}
}
