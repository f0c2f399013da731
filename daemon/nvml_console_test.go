//go:build linux && cgo

package daemon_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/nodes/nvmltest"
)

// TestConsoleShowsNVMLTelemetry: hearth up reading an RTX 4090 and an RTX
// 3090 through (mock) NVML shows both GPUs' live telemetry in the console:
// sparklines that move, and the memory a foreign program holds, by name.
func TestConsoleShowsNVMLTelemetry(t *testing.T) {
	procRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(procRoot, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(procRoot, "4242", "comm"), []byte("steam-game\n"), 0o644)

	// Each reading of a board moves its utilisation, as a busy GPU's does.
	var reads atomic.Uint32
	moving := func(b nvmltest.Board) func() nvmltest.Board {
		return func() nvmltest.Board {
			b.Util = (reads.Add(1) * 7) % 100
			return b
		}
	}
	lib := nvmltest.Machine(moving(nvmltest.RTX4090()), moving(nvmltest.RTX3090()))
	source := nodes.NewNVMLSource(lib, "sim", procRoot)
	t.Cleanup(func() { source.Close() })

	baseURL, _ := serveTestUp(t, upConfig(t, "--sim", "1x4090+1x3090"), daemon.WithGPUSource(source), daemon.WithGPUInterval(20*time.Millisecond), daemon.WithConsoleTiming(50*time.Millisecond, 0))

	// Two cards, each with utilisation, temperature, power and memory
	// lines of several points, and the game named under the 4090's bar.
	points := regexp.MustCompile(`<polyline points="([^"]+)"`)
	var first string
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := get(t, http.DefaultClient, baseURL+"/console/")
		lines := points.FindAllStringSubmatch(body, -1)
		long := 0
		for _, l := range lines {
			if len(strings.Fields(l[1])) >= 3 {
				long++
			}
		}
		if long >= 8 && strings.Contains(body, "steam-game") {
			if first == "" {
				first = body
			} else if utilLine(body) != utilLine(first) {
				break // the sparklines moved
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console never showed two GPUs' moving telemetry; last page:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The readings reach /metrics too.
	_, metrics, _ := get(t, http.DefaultClient, baseURL+"/metrics")
	for _, want := range []string{
		`hearth_gpu_memory_used_bytes{gpu="0",name="NVIDIA GeForce RTX 4090",node="sim",uuid="GPU-4090-0000"} 2.147483648e+10`,
		`hearth_gpu_power_limit_watts{gpu="1",name="NVIDIA GeForce RTX 3090",node="sim",uuid="GPU-3090-0001"} 350`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "hearth_gpu_"))
		}
	}
}

// utilLine is the first card's utilisation sparkline.
func utilLine(page string) string {
	m := regexp.MustCompile(`(?s)class="sparkline spark-util".*?<polyline points="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}
