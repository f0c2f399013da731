package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Launcher starts engines as containers of the local Docker Engine.
type Launcher struct {
	// Docker is the client of the engine; required.
	Docker *client.Client
	// Node names this host in the containers' labels; required. Two
	// daemons on one Docker Engine need different nodes.
	Node string
	// Image, when set, is run for every engine instead of DefaultImage.
	Image string
	// CUDAVersion is the driver's CUDA version as NVML reports it (12090
	// for 12.9; 0 when unknown); it picks the image tag.
	CUDAVersion int
	// HFCache is the host's Hugging Face cache, mounted into every
	// container; empty: none (every start downloads).
	HFCache string
	// NoGPU starts containers without a GPU device request: only for the
	// simulated images, which need none.
	NoGPU bool
	// HFToken is passed to engines as HF_TOKEN, for gated models.
	HFToken string
	// NoPull refuses to pull a missing image instead of pulling it.
	NoPull bool
	// Progress, when set, is told how each engine's image pull goes.
	Progress func(engine string, p PullProgress)
	// LogLines is how many of a container's log lines are kept; default
	// 1,000.
	LogLines int
	// HTTPClient probes readiness; default hruntime.NewProbeClient().
	HTTPClient *http.Client
	Logger     *slog.Logger

	// ports picks host ports; tests make it hand out a taken one.
	ports func() (hruntime.Ports, error)
}

var (
	_ hruntime.Launcher    = (*Launcher)(nil)
	_ hruntime.LogFollower = (*handle)(nil)
	_ hruntime.Detacher    = (*handle)(nil)
)

// Name is "docker".
func (l *Launcher) Name() string { return "docker" }

// portAttempts is how many sets of host ports a start tries: another
// program may take a free port between the pick and Docker's bind.
const portAttempts = 3

// Launch starts the engine's container, or adopts the one already running
// with the same configuration (left by a daemon that stopped with
// --keep-engines, or that died).
func (l *Launcher) Launch(ctx context.Context, spec hruntime.Spec) (hruntime.Handle, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if l.Docker == nil || l.Node == "" {
		return nil, errors.New("docker launcher: no Docker client or node name")
	}
	image := l.Image
	if image == "" {
		var err error
		if image, err = DefaultImage(spec.Engine, l.CUDAVersion); err != nil {
			return nil, err
		}
	}
	sim, err := l.ensureImage(ctx, spec.Name, image)
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w", spec.Name, err)
	}
	if l.NoGPU && sim == "" {
		l.logger().Warn("starting a real engine without a GPU: it will fail to find one", "engine", spec.Name, "image", image)
	}
	plan, err := planContainer(spec, planOptions{
		node: l.Node, image: image, simImage: sim, hfCache: l.HFCache, noGPU: l.NoGPU, hfToken: l.HFToken,
	})
	if err != nil {
		return nil, err
	}

	if h, ok, err := l.adopt(ctx, spec, plan); err != nil || ok {
		return h, err
	}
	var lastErr error
	for range portAttempts {
		h, err := l.start(ctx, spec, plan)
		if err == nil {
			return h, nil
		}
		lastErr = err
		switch {
		case isPortInUse(err):
			l.logger().Warn("host port taken before the engine bound it; trying others", "engine", spec.Name, "error", err)
		case isRlimitRefused(err) && len(plan.host.Resources.Ulimits) > 0:
			// A Docker Engine that may not raise limits (rootless, or
			// itself in a container): run with the default ones.
			l.logger().Warn("Docker may not lift the memlock limit; starting with the default", "engine", spec.Name, "error", err)
			plan.host.Resources.Ulimits = nil
		default:
			return nil, fmt.Errorf("docker %s: %w", spec.Name, err)
		}
	}
	return nil, fmt.Errorf("docker %s: %w", spec.Name, lastErr)
}

// ensureImage makes sure image is present, pulling it when it is not, and
// returns its LabelSim value.
func (l *Launcher) ensureImage(ctx context.Context, engine, image string) (string, error) {
	inspect, err := l.Docker.ImageInspect(ctx, image)
	if err == nil {
		return inspect.Config.Labels[LabelSim], nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", image, err)
	}
	if l.NoPull {
		return "", &PullError{Image: image, Cause: PullNotFound, Err: errors.New("not on this machine, and pulling is off")}
	}
	l.logger().Info("pulling image", "engine", engine, "image", image)
	var progress func(PullProgress)
	if l.Progress != nil {
		progress = func(p PullProgress) { l.Progress(engine, p) }
	}
	if err := pull(ctx, l.Docker, image, progress); err != nil {
		return "", err
	}
	if inspect, err = l.Docker.ImageInspect(ctx, image); err != nil {
		return "", fmt.Errorf("inspect image %s after the pull: %w", image, err)
	}
	return inspect.Config.Labels[LabelSim], nil
}

// adopt takes over the engine's container when it runs with the planned
// configuration, and removes it when it does not: a container of another
// configuration, or one that exited, is stale.
func (l *Launcher) adopt(ctx context.Context, spec hruntime.Spec, plan containerPlan) (hruntime.Handle, bool, error) {
	got, err := l.Docker.ContainerInspect(ctx, plan.name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("docker %s: inspect container: %w", spec.Name, err)
	}
	c := got.Container
	running := c.State != nil && c.State.Running
	if running && c.Config != nil && c.Config.Labels[LabelConfig] == plan.hash {
		ports, err := hostPorts(c.NetworkSettings, plan.inside)
		if err == nil {
			l.logger().Info("adopting running engine container", "engine", spec.Name, "container", shortID(c.ID))
			return l.newHandle(spec, c.ID, plan.config.Image, ports, true), true, nil
		}
		l.logger().Warn("running container has no usable ports; replacing it", "engine", spec.Name, "error", err)
	} else {
		l.logger().Info("removing stale engine container", "engine", spec.Name, "container", shortID(c.ID), "running", running)
	}
	if err := l.remove(ctx, c.ID); err != nil {
		return nil, false, fmt.Errorf("docker %s: remove stale container: %w", spec.Name, err)
	}
	return nil, false, nil
}

// start creates and starts the container on fresh host ports. On error
// nothing is left behind.
func (l *Launcher) start(ctx context.Context, spec hruntime.Spec, plan containerPlan) (hruntime.Handle, error) {
	pick := l.ports
	if pick == nil {
		pick = func() (hruntime.Ports, error) { return hruntime.FreePorts("127.0.0.1") }
	}
	ports, err := pick()
	if err != nil {
		return nil, err
	}
	host := plan.host
	host.PortBindings = network.PortMap{}
	loopback := netip.MustParseAddr("127.0.0.1")
	for inside, outside := range map[int]int{
		plan.inside.HTTP: ports.HTTP, plan.inside.KVEvents: ports.KVEvents, plan.inside.Replay: ports.Replay,
	} {
		p := network.MustParsePort(strconv.Itoa(inside) + "/tcp")
		host.PortBindings[p] = []network.PortBinding{{HostIP: loopback, HostPort: strconv.Itoa(outside)}}
	}
	created, err := l.Docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: plan.name, Config: &plan.config, HostConfig: &host,
	})
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	if _, err := l.Docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		if rmErr := l.remove(context.WithoutCancel(ctx), created.ID); rmErr != nil {
			l.logger().Warn("removing a container that did not start", "container", shortID(created.ID), "error", rmErr)
		}
		return nil, fmt.Errorf("start container: %w", err)
	}
	l.logger().Info("engine container started", "engine", spec.Name, "container", shortID(created.ID), "image", plan.config.Image)
	return l.newHandle(spec, created.ID, plan.config.Image, ports, false), nil
}

// remove deletes a container, killing it if it runs.
func (l *Launcher) remove(ctx context.Context, id string) error {
	_, err := l.Docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

// RemoveStale removes this node's engine containers that the plan no longer
// names (a GPU taken out, an engine renamed), running or not. Containers of
// planned engines are left for Launch to adopt or replace.
func (l *Launcher) RemoveStale(ctx context.Context, planned []hruntime.Spec) error {
	keep := make(map[string]bool, len(planned))
	for _, s := range planned {
		keep[s.Name] = true
	}
	list, err := EngineContainers(ctx, l.Docker, l.Node, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range list {
		if keep[c.Labels[LabelEngine]] {
			continue
		}
		l.logger().Info("removing engine container no longer planned", "engine", c.Labels[LabelEngine], "container", shortID(c.ID))
		if err := l.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// EngineContainers lists the engine containers of node, the stopped ones
// too when all is set.
func EngineContainers(ctx context.Context, docker *client.Client, node string, all bool) ([]container.Summary, error) {
	list, err := docker.ContainerList(ctx, client.ContainerListOptions{
		All: all, Filters: make(client.Filters).Add("label", LabelNode+"="+node),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: list engine containers: %w", err)
	}
	return list.Items, nil
}

// hostPorts reads the host ports Docker published the engine's ports on.
func hostPorts(ns *container.NetworkSettings, inside hruntime.Ports) (hruntime.Ports, error) {
	if ns == nil {
		return hruntime.Ports{}, errors.New("no network settings")
	}
	find := func(p int) (int, error) {
		for _, b := range ns.Ports[network.MustParsePort(strconv.Itoa(p)+"/tcp")] {
			if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
				return n, nil
			}
		}
		return 0, fmt.Errorf("port %d is not published", p)
	}
	out := hruntime.Ports{Host: "127.0.0.1"}
	var err1, err2, err3 error
	out.HTTP, err1 = find(inside.HTTP)
	out.KVEvents, err2 = find(inside.KVEvents)
	out.Replay, err3 = find(inside.Replay)
	return out, errors.Join(err1, err2, err3)
}

// isPortInUse tells Docker's refusal to bind a host port.
func isPortInUse(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "address already in use") || strings.Contains(msg, "port is already allocated")
}

// isRlimitRefused tells the runtime's refusal to set a resource limit.
func isRlimitRefused(err error) bool {
	return strings.Contains(err.Error(), "error setting rlimit")
}

func shortID(id string) string { return id[:min(12, len(id))] }

func (l *Launcher) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}
