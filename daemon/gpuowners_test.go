package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// fakeProc writes a /proc of processes: pid → parent, and the cgroup line
// of each.
func fakeProc(t *testing.T, procs map[int]struct {
	ppid   int
	cgroup string
}) string {
	t.Helper()
	root := t.TempDir()
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// A command name with a space and a parenthesis, as a process may
		// choose.
		stat := fmt.Sprintf("%d (VLLM::Worker) x) S %d %d 0 0", pid, p.ppid, p.ppid)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(dir, "cgroup"), []byte(p.cgroup+"\n"), 0o644)
	}
	return root
}

func TestMemoryByOwner(t *testing.T) {
	const containerID = "4b1c9e2f7a3d8e6b5c0a1f2e3d4c5b6a7980a1b2c3d4e5f60718293a4b5c6d7e"
	procs := fakeProc(t, map[int]struct {
		ppid   int
		cgroup string
	}{
		100: {1, "0::/user.slice"},                                    // the engine, a child process of hearth
		101: {100, "0::/user.slice"},                                  // its worker
		102: {101, "0::/user.slice"},                                  // the worker's child
		200: {1, "0::/system.slice/docker-" + containerID + ".scope"}, // an engine in a container
		300: {1, "0::/user.slice/game.scope"},                         // a game
	})
	const gib = 1 << 30
	g := nodes.NewGPU("rig", 0)
	g.Processes = []nodes.Process{
		{PID: 101, UsedBytes: 20 * gib, Name: "python3"},
		{PID: 102, UsedBytes: 1 * gib, Name: "python3"},
		{PID: 200, UsedBytes: 3 * gib, Name: "python3"},
		{PID: 300, UsedBytes: 6 * gib, Name: "game.exe"},
		{PID: 400, UsedBytes: 1 * gib}, // gone from /proc
	}
	g.ProcessesKnown = true
	cases := []struct {
		name          string
		id            hruntime.Identity
		engine, other uint64
		others        int
	}{
		{"a child process and its descendants", hruntime.Identity{PID: 100}, 21 * gib, 10 * gib, 3},
		{"a container, by the start of its ID", hruntime.Identity{Container: containerID[:12]}, 3 * gib, 28 * gib, 4},
		{"an engine with no identity (simulated) owns nothing", hruntime.Identity{}, 0, 31 * gib, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			engine, other, others := memoryByOwner(g, tc.id, procs)
			if engine != tc.engine || other != tc.other || len(others) != tc.others {
				t.Errorf("engine %d GiB, other %d GiB, %d other processes; want %d, %d, %d",
					engine/gib, other/gib, len(others), tc.engine/gib, tc.other/gib, tc.others)
			}
		})
	}
}

// TestOwnedByRealProcesses reads the real /proc: a child of this test
// belongs to this process, and this process not to the child.
func TestOwnedByRealProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	me := hruntime.Identity{PID: os.Getpid()}
	if !ownedBy(cmd.Process.Pid, me, "/proc") {
		t.Error("a child process is not counted as its parent's")
	}
	if ownedBy(os.Getpid(), hruntime.Identity{PID: cmd.Process.Pid}, "/proc") {
		t.Error("a parent is counted as its child's")
	}
}

func TestReleaseOwnedCountsOwnEnginesAsFree(t *testing.T) {
	const containerID = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
	procs := fakeProc(t, map[int]struct {
		ppid   int
		cgroup string
	}{
		10: {1, "0::/system.slice/docker-" + containerID + ".scope"},
		20: {1, "0::/user.slice/game.scope"},
	})
	const gib = 1 << 30
	g := nodes.NewGPU("rig", 0)
	g.MemoryTotal, g.MemoryUsed, g.MemoryFree, g.MemoryUsageKnown = 24*gib, 22*gib, 2*gib, true
	g.Processes, g.ProcessesKnown = []nodes.Process{{PID: 10, UsedBytes: 20 * gib}, {PID: 20, UsedBytes: 2 * gib}}, true
	out := releaseOwned([]nodes.GPU{g}, []hruntime.Identity{{Container: containerID}}, procs)
	if got := out[0]; got.MemoryUsed != 2*gib || got.MemoryFree != 22*gib || len(got.Processes) != 1 || got.Processes[0].PID != 20 {
		t.Errorf("after releasing the engine: used %d GiB, free %d GiB, processes %+v", got.MemoryUsed/gib, got.MemoryFree/gib, got.Processes)
	}
	if g.MemoryUsed != 22*gib || len(g.Processes) != 2 {
		t.Error("releaseOwned changed its input")
	}
}
