package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// memoryByOwner splits the memory the processes on a GPU hold between the
// engine with identity id and everything else: a game, another CUDA
// program, an engine Hearth did not start. A process is the engine's when
// it is the engine's process or descends from it (vLLM's workers are its
// children), or runs in the engine's container. procRoot is /proc, or a
// copy of its shape in tests.
func memoryByOwner(g nodes.GPU, id hruntime.Identity, procRoot string) (engine, other uint64, others []nodes.Process) {
	for _, p := range g.Processes {
		if ownedBy(p.PID, id, procRoot) {
			engine += p.UsedBytes
			continue
		}
		other += p.UsedBytes
		others = append(others, p)
	}
	return engine, other, others
}

// ownedBy says whether pid belongs to the engine with identity id.
func ownedBy(pid int, id hruntime.Identity, procRoot string) bool {
	if id.Container != "" {
		cgroup, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
		// Docker's cgroups name the container's full ID, of which the
		// identity holds the start.
		if err == nil && strings.Contains(string(cgroup), id.Container) {
			return true
		}
	}
	if id.PID <= 0 {
		return false
	}
	// Walk up the parents; a process tree deeper than this is not an
	// engine's.
	for range 32 {
		if pid == id.PID {
			return true
		}
		if pid <= 1 {
			return false
		}
		pid = parentOf(pid, procRoot)
	}
	return false
}

// parentOf reads a process's parent from /proc/PID/stat: the field after
// the command, which is in parentheses and may itself hold spaces and
// parentheses. 0 when it cannot be read.
func parentOf(pid int, procRoot string) int {
	stat, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0
	}
	return ppid
}

// withoutOwnEngines counts the memory that this node's running engine
// containers hold as free, for planning: a daemon restarted with
// --keep-engines finds its engines still loaded, and a plan that saw
// their memory as taken would differ from theirs and replace them.
func withoutOwnEngines(ctx context.Context, node string, gpus []nodes.GPU, log *slog.Logger) []nodes.GPU {
	cli, err := docker.Connect(ctx)
	if err != nil {
		return gpus // starting the engines will say what is wrong with Docker
	}
	defer cli.Close()
	ids, err := EngineContainers(ctx, cli, node)
	if err != nil {
		log.Warn("planning without knowing which GPU memory Hearth's engines hold", "err", err)
		return gpus
	}
	return releaseOwned(gpus, ids, "/proc")
}

// EngineContainers names this node's running engine containers.
func EngineContainers(ctx context.Context, cli *client.Client, node string) ([]hruntime.Identity, error) {
	running, err := docker.EngineContainers(ctx, cli, node, false)
	if err != nil {
		return nil, err
	}
	ids := make([]hruntime.Identity, len(running))
	for i, c := range running {
		ids[i] = hruntime.Identity{Container: c.ID}
	}
	return ids, nil
}

// releaseOwned returns gpus with the processes of the engines ids dropped
// and their memory counted as free.
func releaseOwned(gpus []nodes.GPU, ids []hruntime.Identity, procRoot string) []nodes.GPU {
	out := make([]nodes.GPU, len(gpus))
	for i, g := range gpus {
		g = g.Copy()
		for _, id := range ids {
			owned, _, others := memoryByOwner(g, id, procRoot)
			if owned > 0 && g.MemoryUsageKnown {
				g.MemoryUsed -= min(owned, g.MemoryUsed)
				g.MemoryFree += owned
			}
			g.Processes = others
		}
		out[i] = g
	}
	return out
}
