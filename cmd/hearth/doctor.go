package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// doctorConfig is the parsed command line of hearth doctor.
type doctorConfig struct {
	json    bool
	deep    bool
	sim     string
	model   string // "" plans the largest model that fits each GPU
	engine  hruntime.Kind
	image   string // "" is the engine's default image for the driver
	listen  string
	dataDir string
	hfCache string
}

// runDoctor is `hearth doctor`: it checks the host and exits 0 when every
// check passes, 1 when one fails and 2 when some only warn.
func runDoctor(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseDoctorFlags(env, args)
	if err != nil {
		return err
	}
	disc, err := doctorDiscoverer(cfg.sim)
	if err != nil {
		return fmt.Errorf("%w: --sim: %v", errUsage, err)
	}
	if c, ok := disc.(io.Closer); ok {
		defer c.Close()
	}
	doc := &doctor.Doctor{
		GPUs:        nodeGPUSource{discoverer: disc},
		Fitter:      planFitter{model: cfg.model, hub: cfg.hfCache},
		EngineImage: engineImageFor(cfg.engine, cfg.image),
		HFCacheDir:  cfg.hfCache, KVDir: filepath.Join(cfg.dataDir, "kv"), DataDir: cfg.dataDir, Addr: cfg.listen,
		Deep: cfg.deep, DeepImage: cfg.image,
	}
	if cli, err := client.New(client.FromEnv); err == nil {
		defer cli.Close()
		doc.Docker = dockerDoctor{cli: cli}
		// A daemon serving on this machine holds GPU memory in its engine
		// containers: that memory is Hearth's, not another program's.
		node, _ := os.Hostname()
		doc.GPUs = nodeGPUSource{discoverer: disc, engines: func(ctx context.Context) []hruntime.Identity {
			ids, _ := engineContainers(ctx, cli, node)
			return ids
		}}
	}
	checks := doc.Check(ctx)
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doctorJSON{Checks: checks}); err != nil {
			return err
		}
	} else if err := writeDoctorText(env.stdout, checks); err != nil {
		return err
	}
	return doctorExit(checks)
}

func parseDoctorFlags(env *environment, args []string) (doctorConfig, error) {
	fs := newFlagSet(env, "doctor",
		"doctor [--json] [--deep] [--sim 2x4090] [--model M] [--engine vllm|sglang] [--image IMAGE] [--listen ADDR] [--data-dir DIR] [--hf-cache DIR]")
	var cfg doctorConfig
	fs.BoolVar(&cfg.json, "json", false, `print {"checks": [{"name", "status", "evidence", "fix"}]}`)
	fs.BoolVar(&cfg.deep, "deep", false, "also start a container that asks for the GPUs (from the engine image, if it is pulled)")
	fs.StringVar(&cfg.sim, "sim", "", `check against simulated GPUs, e.g. "2x4090", as hearth up --sim takes them`)
	fs.StringVar(&cfg.model, "model", "", "model to weigh against each GPU's free memory (default: the largest that fits the GPU)")
	engine := fs.String("engine", "vllm", "engine whose image the CUDA check weighs: vllm or sglang")
	fs.StringVar(&cfg.image, "image", "", "engine image, as hearth up --image takes it (default: the engine's image for the driver's CUDA)")
	fs.StringVar(&cfg.listen, "listen", defaultListen, "the API address hearth up will listen on")
	fs.StringVar(&cfg.dataDir, "data-dir", defaultDataDir(env.getenv), "Hearth's data directory, as hearth up --data-dir takes it; the SSD KV tier is its kv folder")
	fs.StringVar(&cfg.hfCache, "hf-cache", catalog.HFCacheDir(env.getenv), "Hugging Face hub cache")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	kind, err := hruntime.KindOf(*engine)
	if err != nil || len(kind.Images) == 0 || string(kind.Name) != *engine {
		return cfg, fmt.Errorf("%w: --engine: want vllm or sglang, got %q", errUsage, *engine)
	}
	cfg.engine = kind.Name
	return cfg, nil
}

// doctorDiscoverer chooses where hearth doctor reads the GPUs: the
// simulated list of --sim, else the machine's driver. A driver that cannot
// be reached is what the checks report, not an error here.
func doctorDiscoverer(sim string) (nodes.Discoverer, error) {
	d, err := nodes.NewDiscoverer(nodes.DiscoverConfig{Sim: sim})
	switch {
	case err != nil && sim != "":
		return nil, err
	case err != nil:
		return failedDiscovery{err}, nil
	}
	return d, nil
}

// doctorJSON is hearth doctor --json. Field names are stable.
type doctorJSON struct {
	Checks []doctor.Check `json:"checks"`
}

// writeDoctorText prints one line per check, its fix under it, and a count.
func writeDoctorText(w io.Writer, checks []doctor.Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	counts := map[doctor.Status]int{}
	for _, c := range checks {
		counts[c.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Evidence)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d warned, %d failed\n", counts[doctor.Pass], counts[doctor.Warn], counts[doctor.Fail])
	return err
}

// doctorExit is the command's error for its checks: nil when all pass,
// else an exit status of doctor.ExitCode's choosing.
func doctorExit(checks []doctor.Check) error {
	code := doctor.ExitCode(checks)
	if code == 0 {
		return nil
	}
	var names []string
	for _, c := range checks {
		if (code == 1 && c.Status == doctor.Fail) || (code == 2 && c.Status == doctor.Warn) {
			names = append(names, c.Name)
		}
	}
	verdict := "failed"
	if code == 2 {
		verdict = "warned"
	}
	return &exitStatusError{status: code, msg: fmt.Sprintf("doctor: %s %s", plural(len(names), "check"), verdict+": "+strings.Join(names, ", "))}
}

// engineImageFor is the installer's view of runtime/docker's images: the
// image Hearth runs for a driver's CUDA version (image, when named, is run
// whatever the driver) and what it needs.
func engineImageFor(kind hruntime.Kind, image string) func(int) (string, int) {
	return func(cuda int) (string, int) {
		img := image
		if img == "" {
			img, _ = docker.DefaultImage(kind, cuda) // kind is vllm or sglang, which have images
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
	info := doctor.DockerInfo{ServerVersion: ver.Version, APIVersion: ver.APIVersion, CDISpecDirs: res.Info.CDISpecDirs}
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
