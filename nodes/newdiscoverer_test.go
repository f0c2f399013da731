package nodes

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeNVMLSource stands in for an opened NVML.
type fakeNVMLSource struct{ SimSource }

func TestNewDiscovererFallbackOrder(t *testing.T) {
	nvmlOK := func(cfg DiscoverConfig) (Discoverer, error) {
		return fakeNVMLSource{SimSource{Node: cfg.Node}}, nil
	}
	nvmlMissing := func(DiscoverConfig) (Discoverer, error) {
		return nil, fmt.Errorf("%w (nvml: NVML Shared Library Not Found)", ErrNoDriver)
	}
	nvmlBroken := func(DiscoverConfig) (Discoverer, error) {
		return nil, errors.New("nvml: init: Driver/library version mismatch")
	}
	nvmlMustNotOpen := func(DiscoverConfig) (Discoverer, error) {
		t.Error("NVML opened for a simulated list")
		return nil, ErrNoDriver
	}
	smiFound := func(name string) (string, error) { return "/usr/bin/" + filepath.Base(name), nil }
	smiMissing := func(name string) (string, error) { return "", &exec.Error{Name: name, Err: exec.ErrNotFound} }

	tests := []struct {
		name     string
		cfg      DiscoverConfig
		nvml     func(DiscoverConfig) (Discoverer, error)
		lookPath func(string) (string, error)
		want     string // type of the source, or the error
	}{
		{"sim wins over everything", DiscoverConfig{Sim: "2x4090"}, nvmlMustNotOpen, smiFound, "nodes.SimSource"},
		{"nvml when it loads", DiscoverConfig{}, nvmlOK, smiFound, "nodes.fakeNVMLSource"},
		{"nvidia-smi without nvml", DiscoverConfig{}, nvmlMissing, smiFound, "*nodes.SMISource"},
		{"nvidia-smi when nvml fails otherwise", DiscoverConfig{}, nvmlBroken, smiFound, "*nodes.SMISource"},
		{"nothing: the no-driver sentence", DiscoverConfig{}, nvmlMissing, smiMissing, ErrNoDriver.Error()},
		{"nvml's own failure when there is no nvidia-smi", DiscoverConfig{}, nvmlBroken, smiMissing,
			"nodes: nvml: init: Driver/library version mismatch"},
		{"bad sim list", DiscoverConfig{Sim: "2x4070"}, nvmlMustNotOpen, smiFound, "ErrBadSimSpec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Node = "rig"
			d, err := newDiscoverer(tt.cfg, tt.nvml, tt.lookPath)
			got := fmt.Sprintf("%T", d)
			if err != nil {
				got = err.Error()
			}
			if tt.want == "ErrBadSimSpec" && errors.Is(err, ErrBadSimSpec) {
				return
			}
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewDiscovererSim(t *testing.T) {
	d, err := NewDiscoverer(DiscoverConfig{Node: "desk", Sim: "1x4090+1x3090"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := d.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inv.Host.Source != "sim" || inv.Host.Node != "desk" || len(inv.GPUs) != 2 || inv.GPUs[1].Node != "desk" || inv.GPUs[1].Kind != "rtx3090" {
		t.Errorf("inventory = %+v", inv)
	}
}

func TestNewDiscovererSMIPathKept(t *testing.T) {
	d, err := newDiscoverer(DiscoverConfig{Node: "rig", SMIPath: "/opt/nv/nvidia-smi", ProcRoot: "/host/proc"},
		func(DiscoverConfig) (Discoverer, error) { return nil, ErrNoDriver },
		func(p string) (string, error) { return p, nil })
	if err != nil {
		t.Fatal(err)
	}
	s := d.(*SMISource)
	if s.Path != "/opt/nv/nvidia-smi" || s.ProcRoot != "/host/proc" || s.Node != "rig" {
		t.Errorf("source = %+v", s)
	}
}

func TestNewDiscovererWithNothingHere(t *testing.T) {
	dir := t.TempDir()
	_, err := NewDiscoverer(DiscoverConfig{Node: "rig", SMIPath: filepath.Join(dir, "nvidia-smi"),
		NVMLPath: filepath.Join(dir, "libnvidia-ml.so.1")})
	if err != ErrNoDriver {
		t.Fatalf("NewDiscoverer = %v, want ErrNoDriver itself", err)
	}
}
