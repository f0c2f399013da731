package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// dockerClient connects to the local Docker Engine ($DOCKER_HOST or its
// socket) and checks that it answers.
func dockerClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err == nil {
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err = cli.Ping(pingCtx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			cli.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the Docker Engine does not answer (is it installed and running, and may this user use it? `hearth doctor` checks): %w", err)
	}
	return cli, nil
}

// newDockerLauncher builds the Docker runtime for hearth up. With
// simulated GPUs it runs the simulated images, building them from this
// binary when the Docker Engine lacks them.
func newDockerLauncher(ctx context.Context, cfg upConfig, progress func(string, docker.PullProgress), log *slog.Logger) (*docker.Launcher, func(), error) {
	cli, err := dockerClient(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	l := &docker.Launcher{
		Docker: cli, Node: cfg.node, Image: cfg.image, CUDAVersion: cfg.cudaVersion, HFCache: cfg.hfCache,
		NoGPU: cfg.gpuRuntime == "none", HFToken: cfg.hfToken, Progress: progress,
		Logger: log.With("component", "engine"),
	}
	if cfg.sim != "" && cfg.image == "" {
		l.Image = docker.SimImage(hruntime.Kind(cfg.engine), version)
		l.NoPull = true // Hearth's own images are built here, never pulled
		if err := ensureSimImage(ctx, cli, hruntime.Kind(cfg.engine), l.Image, cfg.hearthBinary, log); err != nil {
			cli.Close()
			return nil, nil, fmt.Errorf("up: %w", err)
		}
	}
	return l, func() { cli.Close() }, nil
}

// ensureSimImage builds a simulated image from the hearth binary when the
// Docker Engine does not have it yet, or has it from another binary.
func ensureSimImage(ctx context.Context, cli *client.Client, flavor hruntime.Kind, image, binary string, log *slog.Logger) error {
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the hearth binary, to build %s: %w", image, err)
		}
		binary = exe
	}
	hash, err := docker.BinaryHash(binary)
	if err != nil {
		return fmt.Errorf("the hearth binary, to build %s: %w", image, err)
	}
	if got, err := cli.ImageInspect(ctx, image); err == nil && got.Config != nil && got.Config.Labels[docker.LabelBinary] == hash {
		return nil
	}
	log.Info("building the simulated engine image", "image", image, "binary", binary)
	if err := docker.BuildSimImage(ctx, cli, binary, flavor, image, nil); err != nil {
		return fmt.Errorf("%w (or build it first: hearth sim-image build --flavor %s --binary PATH)", err, flavor)
	}
	return nil
}

// runSimImage is `hearth sim-image build`.
func runSimImage(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] != "build" {
		return fmt.Errorf("%w: sim-image build [--flavor vllm|sglang] [--tag IMAGE] [--binary PATH]", errUsage)
	}
	fs := newFlagSet(env, "sim-image build", "sim-image build [--flavor vllm|sglang] [--tag IMAGE] [--binary PATH]")
	flavor := fs.String("flavor", "vllm", "which engine the image passes for: vllm or sglang")
	tag := fs.String("tag", "", "image name (default hearth/sim-FLAVOR:VERSION, what hearth up --sim --engine-runtime docker runs)")
	binary := fs.String("binary", "", "static hearth binary to put in the image (default: this one)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	kind, err := sim.ParseKind(*flavor)
	if err != nil || *flavor == "" {
		return fmt.Errorf("%w: --flavor: want vllm or sglang, got %q", errUsage, *flavor)
	}
	if *tag == "" {
		*tag = docker.SimImage(kind, version)
	}
	if *binary == "" {
		if *binary, err = os.Executable(); err != nil {
			return fmt.Errorf("sim-image: %w", err)
		}
	}
	cli, err := dockerClient(ctx)
	if err != nil {
		return fmt.Errorf("sim-image: %w", err)
	}
	defer cli.Close()
	if err := docker.BuildSimImage(ctx, cli, *binary, kind, *tag, env.stdout); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "built %s (%s flavour)\n", *tag, kind)
	return nil
}

// defaultHFCache is where the Hugging Face libraries keep downloads:
// $HF_HOME, else ~/.cache/huggingface.
func defaultHFCache(getenv func(string) string) string {
	if d := getenv("HF_HOME"); d != "" {
		return d
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "huggingface")
	}
	return ""
}

// pullBoard keeps the latest pull progress of each engine, for the console,
// and draws it on the terminal.
type pullBoard struct {
	mu    sync.Mutex
	byEng map[string]docker.PullProgress
	out   io.Writer // the terminal, or nil
	log   *slog.Logger
	last  map[string]time.Time
}

func newPullBoard(stderr io.Writer, log *slog.Logger) *pullBoard {
	b := &pullBoard{byEng: map[string]docker.PullProgress{}, last: map[string]time.Time{}, log: log}
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.out = stderr
		}
	}
	return b
}

// set records engine's pull progress: a bar redrawn in place on a
// terminal, a log line every few seconds otherwise.
func (b *pullBoard) set(engine string, p docker.PullProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byEng[engine] = p
	now := time.Now()
	if b.out != nil {
		fmt.Fprintf(b.out, "\r%-40s %s", engine+" "+p.Image, progressBar(p))
		return
	}
	if now.Sub(b.last[engine]) >= 5*time.Second {
		b.last[engine] = now
		b.log.Info("pulling image", "engine", engine, "image", p.Image, "percent", fmt.Sprintf("%.0f", p.Percent()),
			"layers_done", p.Done, "layers", p.Layers)
	}
}

// get returns engine's pull progress, if it pulled.
func (b *pullBoard) get(engine string) (docker.PullProgress, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.byEng[engine]
	return p, ok
}

// annotate shows an engine that is still starting while its image is
// pulled as in the pulling phase, with the pull's percentage.
func (b *pullBoard) annotate(statuses []hruntime.Status) []hruntime.Status {
	for i, st := range statuses {
		p, ok := b.get(st.Name)
		if !ok || st.State != hruntime.StateStarting || p.Layers == 0 || p.Done == p.Layers {
			continue
		}
		statuses[i].Load = hruntime.LoadState{Phase: hruntime.PhasePulling, Progress: int(max(p.Percent(), -1))}
	}
	return statuses
}

// progressBar draws "[#########-----------]  45% 3/7 layers".
func progressBar(p docker.PullProgress) string {
	const width = 20
	pct := p.Percent()
	filled := 0
	if pct > 0 {
		filled = int(pct / 100 * width)
	}
	return fmt.Sprintf("[%s%s] %3.0f%% %d/%d layers", strings.Repeat("#", filled), strings.Repeat("-", width-filled), max(pct, 0), p.Done, p.Layers)
}
