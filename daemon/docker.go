package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// newDockerLauncher builds the Docker runtime for hearth up. With
// simulated GPUs it runs the simulated images, building them from this
// binary when the Docker Engine lacks them.
func newDockerLauncher(ctx context.Context, cfg Config, progress func(string, docker.PullProgress), log *slog.Logger) (*docker.Launcher, func(), error) {
	cli, err := docker.Connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	l := &docker.Launcher{
		Docker: cli, Node: cfg.Node, Image: cfg.Image, CUDAVersion: cfg.cudaVersion, HFCache: cfg.HFCache,
		NoGPU: cfg.GPURuntime == "none", HFToken: cfg.HFToken, Progress: progress,
		Logger: log.With("component", "engine"),
	}
	// Simulated GPUs run the simulated image; an --image of the engine's
	// own repository then names the release it plays (Spec.EngineVersion),
	// since the real image could find no GPU.
	kind := hruntime.Kind(cfg.Engine)
	k, known := hruntime.Lookup(kind)
	if cfg.Sim != "" && (cfg.Image == "" || known && k.ImageVersion(cfg.Image) != "") {
		l.Image = docker.SimImage(kind, cfg.Version)
		l.NoPull = true // Hearth's own images are built here, never pulled
		if err := ensureSimImage(ctx, cli, hruntime.Kind(cfg.Engine), l.Image, cfg.hearthBinary, log); err != nil {
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
