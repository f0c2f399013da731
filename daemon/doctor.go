package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// hearth doctor's checks (doctor.Doctor) read Hearth's parts through
// the installer's own interfaces; NewDoctor builds them from those views,
// for hearth doctor and for the daemon's Health page alike.

// DoctorConfig is what hearth doctor weighs: the flags of hearth doctor,
// or the daemon's own configuration on its Health page.
type DoctorConfig struct {
	// GPUs reads the GPUs; Engines names the processes of Hearth's
	// engines, whose memory counts as available (nil: this node's engine
	// containers, when the Docker Engine answers).
	GPUs    nodes.Discoverer
	Engines func(context.Context) []hruntime.Identity
	// Model is weighed against each GPU's free memory ("": the largest
	// that fits), read from the Hugging Face home HFCache when the
	// catalog does not list it.
	Model   string
	HFCache string
	// Engine and Image are the engine image the CUDA check weighs (Engine
	// "": vLLM's, the default; Image "": the engine's for the driver).
	Engine hruntime.Kind
	Image  string
	// DataDir is Hearth's data directory and KVStoreDir the node's SSD KV
	// store ("": the data directory's).
	DataDir    DataDir
	KVStoreDir string
	// Addr is the API's address; Serving says this process holds it (the
	// daemon's Health page).
	Addr    string
	Serving bool
	// Deep also starts a container that asks for the GPUs.
	Deep bool
	// SelfChecks reads the engines' start-up self-checks, of their
	// tokenization and their KV events (nil: those of a daemon serving at
	// Addr on this machine, unless Serving).
	SelfChecks EngineSelfChecks
	// WSL is what the host is of WSL2 (nil: this machine, wsl.Detect);
	// ClusterPorts the cluster's TCP ports its networking fixes open
	// (nil: the default cluster and route ports).
	WSL          *wsl.Facts
	ClusterPorts []int
}

// EngineSelfChecks reads the start-up self-checks of a daemon's engines:
// their tokenization and their KV events, one doctor check each.
type EngineSelfChecks interface {
	doctor.TokenizerSource
	doctor.KVEventsSource
}

// NewDoctor builds hearth doctor's checks of c. The returned func closes
// the doctor's Docker client.
func NewDoctor(c DoctorConfig) (*doctor.Doctor, func()) {
	engine := c.Engine
	if engine == "" {
		engine = hruntime.KindVLLM
	}
	kvDir := c.KVStoreDir
	if kvDir == "" {
		kvDir = c.DataDir.KVStore()
	}
	hub := catalog.HFHubDir(c.HFCache)
	if c.SelfChecks == nil && !c.Serving {
		c.SelfChecks = runningSelfChecks{listen: c.Addr, data: c.DataDir}
	}
	if c.WSL == nil {
		host := hostWSL()
		c.WSL = &host
	}
	if c.ClusterPorts == nil {
		c.ClusterPorts = []int{DefaultClusterPort, DefaultRoutePort}
	}
	doc := &doctor.Doctor{
		WSL: c.WSL, ClusterPorts: c.ClusterPorts,
		GPUs:        nodeGPUSource{discoverer: c.GPUs, engines: c.Engines},
		Fitter:      planFitter{model: c.Model, hub: hub},
		EngineImage: EngineImageFor(engine, c.Image),
		HFCacheDir:  c.HFCache, KVDir: kvDir, DataDir: string(c.DataDir),
		Addr: c.Addr, Serving: c.Serving,
		Deep: c.Deep, DeepImage: c.Image,
		Tokenizers: c.SelfChecks, KVEvents: c.SelfChecks,
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return doc, func() {}
	}
	doc.Docker = dockerDoctor{cli: cli}
	if c.Engines == nil {
		// A daemon serving on this machine holds GPU memory in its engine
		// containers: that memory is Hearth's, not another program's.
		node, _ := os.Hostname()
		doc.GPUs = nodeGPUSource{discoverer: c.GPUs, engines: func(ctx context.Context) []hruntime.Identity {
			ids, _ := EngineContainers(ctx, cli, node)
			return ids
		}}
	}
	return doc, func() { cli.Close() }
}

// DoctorDocker is the installer's view of the Docker Engine.
func DoctorDocker(cli *client.Client) doctor.DockerSource { return dockerDoctor{cli: cli} }

// EngineImageFor is the installer's view of runtime/docker's images: the
// image Hearth runs for a driver's CUDA version (image, when named, is run
// whatever the driver) and what it needs; nil, which skips the comparison,
// for a kind without images when none is named.
func EngineImageFor(kind hruntime.Kind, image string) func(int) (string, int) {
	if k, ok := hruntime.Lookup(kind); image == "" && (!ok || len(k.Images) == 0) {
		return nil
	}
	return func(cuda int) (string, int) {
		img := image
		if img == "" {
			img, _ = docker.DefaultImage(kind, cuda) // the kind has images
		}
		return img, docker.RequiredCUDA(img)
	}
}

// nodeGPUSource is the installer's view of GPU discovery.
type nodeGPUSource struct {
	discoverer nodes.Discoverer
	// engines names the processes of Hearth's engines (the daemon's own,
	// or this node's engine containers): the memory they hold counts as
	// available, so the checks do not flag Hearth's own engines. nil:
	// none.
	engines func(context.Context) []hruntime.Identity
}

var _ doctor.GPUSource = nodeGPUSource{}

func (s nodeGPUSource) GPUs(ctx context.Context) (doctor.GPUFacts, error) {
	inv, err := s.discoverer.Discover(ctx)
	facts := doctor.GPUFacts{
		Source: inv.Host.Source, DriverVersion: inv.Host.DriverVersion, CUDAVersion: inv.Host.CUDADriverVersion,
	}
	switch {
	case errors.Is(err, nodes.ErrNoDriver):
		return facts, fmt.Errorf("%w: %w", doctor.ErrNoDriver, err)
	case errors.Is(err, nodes.ErrNoGPU):
		return facts, nil // a driver with no GPU: the installer says so
	case err != nil:
		return facts, err
	}
	if facts.Source == "nvidia-smi" {
		facts.NVMLErr = "discovery fell back to nvidia-smi"
	}
	var engines []hruntime.Identity
	if s.engines != nil {
		engines = s.engines(ctx)
	}
	for _, g := range inv.GPUs {
		gpu := doctor.GPUMemory{
			Index: g.Index, Name: g.Name, MemoryTotal: g.MemoryTotal, MemoryFree: g.MemoryFree,
			MemoryKnown: g.MemoryUsageKnown, Err: g.Err,
		}
		if g.Simulated {
			// A simulated board reports no use: nothing but its simulated
			// engine is on it.
			gpu.MemoryFree, gpu.MemoryKnown = g.MemoryTotal, true
		}
		for _, id := range engines {
			held, _, _ := memoryByOwner(g, id, "/proc")
			gpu.HearthBytes += held
		}
		facts.GPUs = append(facts.GPUs, gpu)
	}
	return facts, nil
}

// planFitter weighs a model against one GPU with catalog.PlanEngines. With
// no model named it plans the largest model that fits the GPU when it is
// free, so the check says what other programs cost it.
type planFitter struct {
	model string
	hub   string // Hugging Face hub cache for models named by repository
}

var _ doctor.Fitter = planFitter{}

func (f planFitter) Fit(g doctor.GPUMemory, available uint64) (doctor.Fit, error) {
	board := catalog.GPUByName(g.Name, g.MemoryTotal)
	board.MemoryBytes = g.MemoryTotal
	idle := catalog.GPUUse{GPU: board}
	var model catalog.Model
	var err error
	if f.model == "" {
		model, err = catalog.DefaultModel([]catalog.GPUUse{idle})
		if errors.Is(err, catalog.ErrDoesNotFit) {
			return doctor.Fit{Reason: err.Error()}, nil
		}
	} else {
		model, err = catalog.ResolveModel(f.model, f.hub)
	}
	if err != nil {
		return doctor.Fit{}, err
	}
	fit := doctor.Fit{Model: model.DisplayName(), ModelContext: model.MaxModelLen}
	plan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: []catalog.GPUUse{{GPU: board, UsedBytes: g.MemoryTotal - available}}, Model: model})
	if errors.Is(err, catalog.ErrDoesNotFit) {
		fit.Reason = err.Error()
		return fit, nil
	} else if err != nil {
		return doctor.Fit{}, err
	}
	fit.Fits, fit.Context, fit.IdleContext = true, plan.MaxModelLen, plan.MaxModelLen
	if idlePlan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: []catalog.GPUUse{idle}, Model: model}); err == nil {
		fit.IdleContext = idlePlan.MaxModelLen
	}
	return fit, nil
}

// dockerDoctor is the installer's view of the Docker Engine.
type dockerDoctor struct{ cli *client.Client }

var _ doctor.DockerSource = dockerDoctor{}

// labelDoctor marks the containers hearth doctor --deep starts.
const labelDoctor = "hearth.doctor"

func (d dockerDoctor) Info(ctx context.Context) (doctor.DockerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return doctor.DockerInfo{}, err
	}
	ver, err := d.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return doctor.DockerInfo{}, err
	}
	res, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return doctor.DockerInfo{}, err
	}
	info := doctor.DockerInfo{ServerVersion: ver.Version, APIVersion: ver.APIVersion, CDISpecDirs: res.Info.CDISpecDirs, OperatingSystem: res.Info.OperatingSystem}
	for name := range res.Info.Runtimes {
		info.Runtimes = append(info.Runtimes, name)
	}
	for _, dev := range res.Info.DiscoveredDevices {
		if dev.Source == "cdi" {
			info.CDIDevices = append(info.CDIDevices, dev.ID)
		}
	}
	return info, nil
}

func (d dockerDoctor) ImagePresent(ctx context.Context, image string) (bool, error) {
	_, err := d.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// RunGPU runs cmd in a container of image that asks for every GPU the way
// hearth up's engines do, and removes it whatever happens.
func (d dockerDoctor) RunGPU(ctx context.Context, image string, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	created, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Entrypoint: cmd[:1], Cmd: cmd[1:], Labels: map[string]string{labelDoctor: "deep"}},
		HostConfig: &container.HostConfig{Resources: container.Resources{DeviceRequests: []container.DeviceRequest{{
			Count: -1, Capabilities: [][]string{{"gpu"}},
		}}}},
	})
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	defer d.cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true}) //nolint:errcheck // best effort; a leftover is labelled hearth.doctor
	if _, err := d.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	wait := d.cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var status int64
	select {
	case res := <-wait.Result:
		status = res.StatusCode
	case err := <-wait.Error:
		return "", fmt.Errorf("wait: %w", err)
	}
	logs, err := d.cli.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	defer logs.Close()
	var out strings.Builder
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(logs, 64<<10)); err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	if status != 0 {
		return out.String(), fmt.Errorf("%s exited with status %d: %s", strings.Join(cmd, " "), status, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
