//go:build unix

package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Launcher starts engines as child processes.
type Launcher struct {
	// Hearth is the path of the hearth binary, which runs simulated
	// engines (`hearth sim-engine`).
	Hearth string
	// Host is the address engines bind their HTTP API to; default
	// 127.0.0.1.
	Host string
	// Env is the environment every child starts from (the daemon's own);
	// the launcher adds the GPU selection, PYTHONHASHSEED and the spec's
	// Env.
	Env []string
	// LogLines is how many of a child's output lines are kept; default
	// 1,000.
	LogLines int
	// HTTPClient probes readiness; default hruntime.NewProbeClient().
	HTTPClient *http.Client
	// Logger gets the children's output at debug level.
	Logger *slog.Logger
}

var _ hruntime.Launcher = (*Launcher)(nil)

// Name is "process".
func (l *Launcher) Name() string { return "process" }

// Launch spawns the engine's process on free ports.
func (l *Launcher) Launch(ctx context.Context, spec hruntime.Spec) (hruntime.Handle, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	host := l.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ports, err := hruntime.FreePorts(host)
	if err != nil {
		return nil, fmt.Errorf("process %s: %w", spec.Name, err)
	}
	argv := spec.Command
	if len(argv) == 0 {
		if spec.Simulated && l.Hearth == "" {
			return nil, fmt.Errorf("process %s: no hearth binary to run the simulated engine", spec.Name)
		}
		argv = hruntime.EngineArgs(spec, ports, l.Hearth)
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("engine", spec.Name)
	lines := l.LogLines
	if lines <= 0 {
		lines = 1000
	}
	ring := hruntime.NewLogRing(lines, func(line string) { log.Debug(line) })

	// Not CommandContext: the engine's life is the handle's, ended by Stop
	// with a grace period, not by the launch context.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string(nil), l.Env...),
		"CUDA_VISIBLE_DEVICES="+spec.GPUIDs(),
		"PYTHONHASHSEED=0",
		// For a command the user names: where Hearth expects it to serve.
		"HEARTH_ENGINE_HOST="+ports.Host,
		"HEARTH_ENGINE_PORT="+strconv.Itoa(ports.HTTP),
		"HEARTH_KV_EVENTS_PORT="+strconv.Itoa(ports.KVEvents),
		"HEARTH_KV_REPLAY_PORT="+strconv.Itoa(ports.Replay),
	)
	cmd.Env = append(cmd.Env, hruntime.EngineEnv(spec)...)
	cmd.Env = append(cmd.Env, spec.Env...)
	cmd.Stdout, cmd.Stderr = ring, ring
	cmd.SysProcAttr = sysProcAttr()
	// A grandchild holding the output pipe open must not keep Wait from
	// returning once the engine itself has exited.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("process %s: start %s: %w", spec.Name, argv[0], err)
	}
	client := l.HTTPClient
	if client == nil {
		client = hruntime.NewProbeClient()
	}
	h := &handle{
		cmd: cmd, model: spec.Model, endpoints: ports.Endpoints(spec.Engine), ring: ring,
		client: client, exited: make(chan struct{}),
	}
	go func() {
		h.err = cmd.Wait()
		close(h.exited)
	}()
	return h, nil
}

// handle is one child process.
type handle struct {
	cmd       *exec.Cmd
	model     string
	endpoints hruntime.Endpoints
	ring      *hruntime.LogRing
	client    *http.Client
	exited    chan struct{}
	err       error // set before exited closes
}

func (h *handle) Endpoints() hruntime.Endpoints { return h.endpoints }

func (h *handle) Identity() hruntime.Identity { return hruntime.Identity{PID: h.cmd.Process.Pid} }

func (h *handle) Logs() []string { return h.ring.Lines() }

// LogsSince lets the supervisor follow the engine's output as it comes.
func (h *handle) LogsSince(seq uint64) ([]string, uint64, <-chan struct{}) {
	return h.ring.LinesSince(seq)
}

var _ hruntime.LogFollower = (*handle)(nil)

func (h *handle) Ready(ctx context.Context) error {
	return hruntime.WaitReady(ctx, h.client, h.endpoints.BaseURL, h.model, h.exited)
}

func (h *handle) Wait() error {
	<-h.exited
	return h.err
}

// Stop sends SIGTERM to the engine's process group, and SIGKILL when ctx
// ends before it has exited.
func (h *handle) Stop(ctx context.Context) error {
	pgid := -h.cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop: %w", err)
	}
	select {
	case <-h.exited:
		return nil
	case <-ctx.Done():
	}
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill: %w", err)
	}
	<-h.exited
	return fmt.Errorf("stop: killed after %w", context.Cause(ctx))
}
