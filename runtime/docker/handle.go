package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// ErrDetached is what Wait returns after Detach: the container still runs.
var ErrDetached = errors.New("detached from the running container")

// handle is one engine container.
type handle struct {
	docker    *client.Client
	id, model string
	image     string
	endpoints hruntime.Endpoints
	ring      *hruntime.LogRing
	http      *http.Client
	log       *slog.Logger

	// cancel ends the log stream and the wait on the container: on Detach,
	// or once the container has exited.
	cancel   context.CancelFunc
	detached chan struct{}
	detach   sync.Once
	exited   chan struct{}
	err      error // set before exited closes
}

// logDrain bounds how long an exit waits for the container's last log
// lines, which the diagnosis of a failed start reads.
const logDrain = 2 * time.Second

func (l *Launcher) newHandle(spec hruntime.Spec, id, image string, ports hruntime.Ports, adopted bool) *handle {
	lines := l.LogLines
	if lines <= 0 {
		lines = 1000
	}
	log := l.logger().With("engine", spec.Name, "container", shortID(id))
	httpClient := l.HTTPClient
	if httpClient == nil {
		httpClient = hruntime.NewProbeClient()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{
		docker: l.Docker, id: id, image: image, model: spec.Model, endpoints: ports.Endpoints(spec.Engine),
		ring: hruntime.NewLogRing(lines, func(line string) { log.Debug(line) }),
		http: httpClient, log: log, cancel: cancel,
		detached: make(chan struct{}), exited: make(chan struct{}),
	}
	tail := "all"
	if adopted {
		// An adopted engine's whole history may be long; its last lines
		// are what the console shows.
		tail = strconv.Itoa(lines)
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		h.follow(ctx, tail)
	}()
	go func() {
		h.err = h.waitExit(ctx)
		if h.err != ErrDetached {
			select {
			case <-logsDone:
			case <-time.After(logDrain):
			}
		}
		cancel()
		<-logsDone
		close(h.exited)
	}()
	return h
}

// follow copies the container's output into the log ring until the
// container stops or ctx ends.
func (h *handle) follow(ctx context.Context, tail string) {
	rc, err := h.docker.ContainerLogs(ctx, h.id, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: true, Tail: tail,
	})
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("reading the container's log", "error", err)
		}
		return
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(h.ring, h.ring, rc); err != nil && ctx.Err() == nil {
		h.log.Warn("reading the container's log", "error", err)
	}
}

// waitExit returns why the container stopped running.
func (h *handle) waitExit(ctx context.Context) error {
	res := h.docker.ContainerWait(ctx, h.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-res.Result:
		return exitError(r, h.oomKilled())
	case err := <-res.Error:
		select {
		case <-h.detached:
			return ErrDetached
		default:
		}
		// The Docker Engine restarted or the container was removed
		// under us: the supervisor starts the engine again, and adopts the
		// container if it still runs.
		return fmt.Errorf("lost track of the container: %w", err)
	}
}

// oomKilled asks whether the kernel killed the container for memory.
func (h *handle) oomKilled() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := h.docker.ContainerInspect(ctx, h.id, client.ContainerInspectOptions{})
	return err == nil && got.Container.State != nil && got.Container.State.OOMKilled
}

func exitError(r container.WaitResponse, oomKilled bool) error {
	var err error
	switch {
	case r.Error != nil && r.Error.Message != "":
		err = fmt.Errorf("exit status %d: %s", r.StatusCode, r.Error.Message)
	case r.StatusCode != 0:
		err = fmt.Errorf("exit status %d", r.StatusCode)
	}
	if oomKilled {
		if err == nil {
			err = errors.New("exited")
		}
		err = fmt.Errorf("%w (killed by the kernel: the host ran out of memory)", err)
	}
	return err
}

func (h *handle) Endpoints() hruntime.Endpoints { return h.endpoints }

func (h *handle) Identity() hruntime.Identity {
	return hruntime.Identity{Container: shortID(h.id), Image: h.image}
}

func (h *handle) Logs() []string { return h.ring.Lines() }

func (h *handle) Ready(ctx context.Context) error {
	return hruntime.WaitReady(ctx, h.http, h.endpoints.BaseURL, h.model, h.exited)
}

func (h *handle) Wait() error {
	<-h.exited
	return h.err
}

// Stop asks the engine to stop (SIGTERM), lets Docker kill it when ctx's
// deadline passes (30 s without one), and removes the container.
func (h *handle) Stop(ctx context.Context) error {
	grace := 30
	if dl, ok := ctx.Deadline(); ok {
		grace = max(0, int(time.Until(dl).Seconds())-1)
	}
	_, stopErr := h.docker.ContainerStop(ctx, h.id, client.ContainerStopOptions{Timeout: &grace})
	if stopErr != nil {
		// ctx ended or Docker refused: kill without grace.
		killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := h.docker.ContainerKill(killCtx, h.id, client.ContainerKillOptions{}); err != nil {
			h.log.Warn("killing the container", "error", err)
		}
	}
	<-h.exited
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := h.docker.ContainerRemove(rmCtx, h.id, client.ContainerRemoveOptions{Force: true}); err != nil {
		return fmt.Errorf("remove container: %w", err)
	}
	if stopErr != nil {
		return fmt.Errorf("stop: killed after %w", stopErr)
	}
	return nil
}

// Detach lets go of the container without stopping it: a daemon stopping
// with --keep-engines leaves its engines running for the next to adopt.
func (h *handle) Detach() {
	h.detach.Do(func() {
		close(h.detached)
		h.cancel()
	})
	<-h.exited
}

// LogsSince returns the lines logged after seq, for a reader that follows
// the engine's log (runtime.LogFollower).
func (h *handle) LogsSince(seq uint64) ([]string, uint64, <-chan struct{}) {
	return h.ring.LinesSince(seq)
}
