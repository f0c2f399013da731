package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

const gb = 1 << 30

// healthy returns a Doctor whose every check passes: one 24 GB GPU with a
// CUDA 13 driver, Docker with the nvidia runtime, roomy disks.
func healthy() (*Doctor, *fakeGPUs, *fakeDocker, *fakeSystem) {
	gpus := &fakeGPUs{facts: GPUFacts{
		Source: "nvml", DriverVersion: "580.95.05", CUDAVersion: 13000,
		GPUs: []GPUMemory{{Index: 0, Name: "NVIDIA GeForce RTX 4090", MemoryTotal: 24 * gb, MemoryFree: 23 * gb, MemoryKnown: true}},
	}}
	dock := &fakeDocker{
		info:   DockerInfo{ServerVersion: "28.2.2", APIVersion: "1.50", Runtimes: []string{"runc", "nvidia"}},
		images: map[string]bool{"vllm/vllm-openai:v0.20.0": true},
		runOut: "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\n",
	}
	sys := &fakeSystem{
		diskFree: map[string]uint64{"/hf": 500 * gb, "/data/kv": 500 * gb},
		memAvail: 64 * gb, mcast: []string{"eth0"},
	}
	d := &Doctor{
		GPUs: gpus, Docker: dock, System: sys,
		Fitter: fakeFitter{weightBytes: 16 * gb, bytesPerToken: 128 << 10, maxContext: 40960},
		EngineImage: func(cuda int) (string, int) {
			if cuda < 13000 {
				return "vllm/vllm-openai:v0.20.0-cu129", 12090
			}
			return "vllm/vllm-openai:v0.20.0", 13000
		},
		HFCacheDir: "/hf", KVDir: "/data/kv", DataDir: "/data", Addr: "127.0.0.1:8000", Deep: true,
	}
	return d, gpus, dock, sys
}

func TestHealthyHostPassesEveryCheck(t *testing.T) {
	d, _, _, _ := healthy()
	checks := d.Check(context.Background())
	want := []string{CheckDriver, CheckNVML, CheckCUDA, GPUMemoryName(0), CheckDocker, CheckNVIDIARuntime, CheckDeepGPU,
		CheckHFCacheDisk, CheckKVDisk, CheckRAM, CheckAPIPort, CheckMulticast, CheckDataDir}
	if len(checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %+v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Name != want[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, want[i])
		}
		if c.Status != Pass || c.Fix != "" || c.Evidence == "" || strings.Contains(c.Evidence, "\n") {
			t.Errorf("%s: %+v, want a pass with one line of evidence and no fix", c.Name, c)
		}
	}
	if code := ExitCode(checks); code != 0 {
		t.Errorf("ExitCode = %d, want 0", code)
	}
}

func TestChecks(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Doctor, *fakeGPUs, *fakeDocker, *fakeSystem)
		check  string
		status Status
		// evidence and fix must contain these.
		evidence, fix string
	}{
		{"driver version", nil, CheckDriver, Pass, "driver 580.95.05", ""},
		{"no driver", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, fmt.Errorf("nodes: %w", ErrNoDriver)
		}, CheckDriver, Fail, "no NVIDIA driver", "install the NVIDIA driver (R580 or newer for CUDA 13 images)"},
		{"no driver fails nvml", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, ErrNoDriver
		}, CheckNVML, Fail, "libnvidia-ml.so.1", "install the NVIDIA driver"},
		{"no driver fails cuda", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, ErrNoDriver
		}, CheckCUDA, Fail, "no driver", "R580"},
		{"no driver fails gpu memory", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, ErrNoDriver
		}, GPUMemoryName(0), Fail, "no GPU", "install the NVIDIA driver"},
		{"driver but nvml failed", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, errors.New("nvml: Driver/library version mismatch")
		}, CheckNVML, Fail, "version mismatch", "reboot"},
		{"driver but nvml failed: driver warns", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts, g.err = GPUFacts{}, errors.New("nvml: Driver/library version mismatch")
		}, CheckDriver, Warn, "present but could not be read", "nvidia-smi"},
		{"read through nvidia-smi", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.Source, g.facts.NVMLErr = "nvidia-smi", "built without cgo"
		}, CheckNVML, Warn, "through nvidia-smi", "libnvidia-ml.so.1"},
		{"nvml loaded", nil, CheckNVML, Pass, "NVML loaded", ""},
		{"cuda 13", nil, CheckCUDA, Pass, "CUDA 13.0: Hearth runs vllm/vllm-openai:v0.20.0", ""},
		{"cuda 12.9 runs the cu129 image", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.CUDAVersion = 12090
		}, CheckCUDA, Pass, "-cu129 (CUDA 13 images need R580", ""},
		{"cuda 12.4 is too old", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.CUDAVersion = 12040
		}, CheckCUDA, Fail, "CUDA 12.4; the engine image vllm/vllm-openai:v0.20.0-cu129 needs CUDA 12.9", "upgrade the NVIDIA driver"},
		{"explicit CUDA 13 image on an old driver", func(d *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.CUDAVersion = 12090
			d.EngineImage = func(int) (string, int) { return "vllm/vllm-openai:v0.20.0", 13000 }
		}, CheckCUDA, Fail, "needs CUDA 13.0", "R580"},
		{"cuda unknown", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.CUDAVersion = 0
		}, CheckCUDA, Warn, "did not report", "nvidia-smi"},
		{"model fits the whole context", nil, GPUMemoryName(0), Pass, "23.0 GiB available of 24.0 GiB; Test-14B fits with a 40,960-token context", ""},
		{"others shorten the context", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs[0].MemoryFree = 18 * gb
		}, GPUMemoryName(0), Warn, "18.0 GiB available of 24.0 GiB; Test-14B fits with a 16,384-token context, 40,960 with the GPU free",
			"close the programs holding 6.0 GiB"},
		{"model does not fit", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs[0].MemoryFree = 10 * gb
		}, GPUMemoryName(0), Fail, "10.0 GiB available of 24.0 GiB; Test-14B needs 16 GB", "smaller model"},
		{"hearth's own engines count as available", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs[0].MemoryFree, g.facts.GPUs[0].HearthBytes = 1*gb, 22*gb
		}, GPUMemoryName(0), Pass, "23.0 GiB available of 24.0 GiB, 22.0 GiB of it held by Hearth's engines", ""},
		{"memory unknown", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs[0].MemoryKnown = false
		}, GPUMemoryName(0), Warn, "does not report its free memory", "nvidia-smi"},
		{"lost gpu", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs[0].Err = "GPU is lost"
		}, GPUMemoryName(0), Fail, "GPU is lost", "reboot"},
		{"planner error", func(d *Doctor, _ *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			d.Fitter = fakeFitter{err: errors.New("unknown model")}
		}, GPUMemoryName(0), Warn, "planning failed: unknown model", "hearth plan"},
		{"driver lists no gpu", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts.GPUs = nil
		}, GPUMemoryName(0), Fail, "lists no GPU", "nvidia-smi"},
		{"simulated gpus need no driver", func(_ *Doctor, g *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			g.facts = GPUFacts{Source: "sim", GPUs: g.facts.GPUs}
		}, CheckDriver, Pass, "simulated", ""},
		{"docker version", nil, CheckDocker, Pass, "Docker Engine 28.2.2 (API 1.50)", ""},
		{"docker socket refuses the user", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.infoErr = fmt.Errorf("permission denied while trying to connect to the docker API: %w", syscall.EACCES)
		}, CheckDocker, Fail, "permission denied", "sudo usermod -aG docker $USER, then log in again"},
		{"docker permission by words", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.infoErr = errors.New("dial unix /var/run/docker.sock: connect: permission denied")
		}, CheckDocker, Fail, "permission denied", "docker group"},
		{"docker down", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.infoErr = errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
		}, CheckDocker, Fail, "does not answer", "systemctl enable --now docker"},
		{"docker down: runtime unknown", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.infoErr = errors.New("connection refused")
		}, CheckNVIDIARuntime, Fail, "does not answer", "docker check first"},
		{"no docker client", func(d *Doctor, _ *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			d.Docker = nil
		}, CheckDeepGPU, Fail, "does not answer", "docker check first"},
		{"nvidia runtime", nil, CheckNVIDIARuntime, Pass, "nvidia runtime is registered", ""},
		{"cdi devices", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.info.Runtimes = []string{"runc"}
			dk.info.CDIDevices = []string{"nvidia.com/gpu=0", "nvidia.com/gpu=all"}
		}, CheckNVIDIARuntime, Pass, "CDI devices: nvidia.com/gpu=0, nvidia.com/gpu=all", ""},
		{"no nvidia runtime", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.info.Runtimes = []string{"runc", "io.containerd.runc.v2"}
			dk.info.CDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}
		}, CheckNVIDIARuntime, Fail, "runtimes: io.containerd.runc.v2, runc) and no NVIDIA CDI device in /etc/cdi, /var/run/cdi",
			"nvidia-ctk runtime configure --runtime=docker"},
		{"deep: gpu seen", nil, CheckDeepGPU, Pass, "sees: GPU 0: NVIDIA GeForce RTX 4090", ""},
		{"deep: image not pulled", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.images = nil
		}, CheckDeepGPU, Warn, "vllm/vllm-openai:v0.20.0 is not pulled", "docker pull vllm/vllm-openai:v0.20.0"},
		{"deep: container fails", func(_ *Doctor, _ *fakeGPUs, dk *fakeDocker, _ *fakeSystem) {
			dk.runErr = errors.New(`could not select device driver "" with capabilities: [[gpu]]`)
		}, CheckDeepGPU, Fail, "could not select device driver", "nvidia-container-toolkit"},
		{"hf cache roomy", nil, CheckHFCacheDisk, Pass, "500.0 GiB free at /hf", ""},
		{"hf cache short", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.diskFree["/hf"] = 30 * gb
		}, CheckHFCacheDisk, Warn, "30.0 GiB free at /hf, under 50.0 GiB", "HF_HOME"},
		{"hf cache unreadable", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.diskErr = errors.New("statfs: input/output error")
		}, CheckHFCacheDisk, Warn, "input/output error", "can be read"},
		{"no home", func(d *Doctor, _ *fakeGPUs, _ *fakeDocker, _ *fakeSystem) {
			d.HFCacheDir = ""
		}, CheckHFCacheDisk, Warn, "HOME is not set", "HF_HOME"},
		{"kv tier short", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.diskFree["/data/kv"] = 5 * gb
		}, CheckKVDisk, Warn, "5.0 GiB free at /data/kv, under 20.0 GiB", "--data-dir"},
		{"ram", nil, CheckRAM, Pass, "64.0 GiB available", ""},
		{"ram short", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.memAvail = 8 * gb
		}, CheckRAM, Warn, "8.0 GiB available, under 16.0 GiB", "--kv-offloading-size"},
		{"port free", nil, CheckAPIPort, Pass, "127.0.0.1:8000 is free", ""},
		{"port taken", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.listenErr = errors.New("listen tcp 127.0.0.1:8000: bind: address already in use")
		}, CheckAPIPort, Fail, "address already in use", "hearth up --listen"},
		{"port held by this daemon", func(d *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			d.Serving, s.listenErr = true, errors.New("address already in use")
		}, CheckAPIPort, Pass, "Hearth serves the API on 127.0.0.1:8000", ""},
		{"multicast", nil, CheckMulticast, Pass, "multicast on eth0", ""},
		{"no multicast interface", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.mcast = nil
		}, CheckMulticast, Warn, "no up, non-loopback interface", "one machine alone"},
		{"multicast join refused", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.mcastErr = errors.New("joining 224.0.0.251 on eth0: no such device")
		}, CheckMulticast, Warn, "no such device", "firewall"},
		{"data dir writable", nil, CheckDataDir, Pass, "/data is writable", ""},
		{"data dir read-only", func(_ *Doctor, _ *fakeGPUs, _ *fakeDocker, s *fakeSystem) {
			s.writeErr = &fs.PathError{Op: "open", Path: "/data/.hearth-doctor-1", Err: fs.ErrPermission}
		}, CheckDataDir, Fail, "permission denied", "--data-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, g, dk, s := healthy()
			if tc.change != nil {
				tc.change(d, g, dk, s)
			}
			checks := d.Check(context.Background())
			c, ok := find(checks, tc.check)
			if !ok {
				t.Fatalf("no check %q in %+v", tc.check, checks)
			}
			if c.Status != tc.status {
				t.Errorf("status %s, want %s: %+v", c.Status, tc.status, c)
			}
			if !strings.Contains(c.Evidence, tc.evidence) {
				t.Errorf("evidence %q, want it to contain %q", c.Evidence, tc.evidence)
			}
			if !strings.Contains(c.Fix, tc.fix) || (tc.status == Pass) != (c.Fix == "") {
				t.Errorf("fix %q, want it to contain %q, and empty exactly for a pass", c.Fix, tc.fix)
			}
			if strings.ContainsAny(c.Evidence+c.Fix, "\n\r") {
				t.Errorf("evidence or fix spans lines: %+v", c)
			}
		})
	}
}

func TestDeepOnlyWhenAsked(t *testing.T) {
	d, _, dk, _ := healthy()
	d.Deep = false
	if _, ok := find(d.Check(context.Background()), CheckDeepGPU); ok || len(dk.ran) != 0 {
		t.Errorf("without Deep, a container ran (%v) or the check was listed", dk.ran)
	}
	d.Deep, d.DeepImage = true, "busybox:local"
	dk.images["busybox:local"] = true
	d.Check(context.Background())
	if len(dk.ran) != 1 || dk.ran[0] != "busybox:local" {
		t.Errorf("ran %v, want one container of DeepImage", dk.ran)
	}
}

func TestEveryGPUGetsAMemoryCheck(t *testing.T) {
	d, g, _, _ := healthy()
	g.facts.GPUs = append(g.facts.GPUs, GPUMemory{Index: 1, Name: "NVIDIA GeForce RTX 3060", MemoryTotal: 12 * gb, MemoryFree: 11 * gb, MemoryKnown: true})
	checks := d.Check(context.Background())
	if c, _ := find(checks, GPUMemoryName(0)); c.Status != Pass {
		t.Errorf("gpu 0: %+v, want pass", c)
	}
	if c, _ := find(checks, GPUMemoryName(1)); c.Status != Fail || !strings.Contains(c.Evidence, "RTX 3060") {
		t.Errorf("gpu 1: %+v, want a fail naming the RTX 3060", c)
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		name     string
		statuses []Status
		want     int
	}{
		{"none", nil, 0},
		{"all pass", []Status{Pass, Pass}, 0},
		{"a warning", []Status{Pass, Warn, Pass}, 2},
		{"a failure", []Status{Pass, Fail}, 1},
		{"failure beats warning", []Status{Warn, Fail, Warn}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var checks []Check
			for _, s := range tc.statuses {
				checks = append(checks, Check{Status: s})
			}
			if got := ExitCode(checks); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.statuses, got, tc.want)
			}
		})
	}
}

func find(checks []Check, name string) (Check, bool) {
	for _, c := range checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}
