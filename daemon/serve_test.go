package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/router"
)

// simConfig is the Config hearth up's command line gives for
// `--sim spec --speedup 100 --data-dir <temp>` with nothing else set:
// simulated engines in the daemon, the default model of a 24 GB board and
// the flags' defaults. edit changes it as further flags would.
func simConfig(t testing.TB, spec string, edit func(*daemon.Config)) daemon.Config {
	t.Helper()
	cfg := daemon.Config{
		Sim: spec, EngineRuntime: daemon.RuntimeSim, GPURuntime: "none", TP: 1,
		StopTimeout: 30 * time.Second, Listen: "127.0.0.1:8000", Policy: router.PolicyHearth,
		DataDir: t.TempDir(), Speedup: 100, KVOffloadGiB: 32, Tiers: kvbm.TiersRAMSSD,
		TLS: daemon.TLSOff, Version: "dev",
		Cluster: daemon.ClusterConfig{MDNS: true,
			Listen:      net.JoinHostPort("0.0.0.0", strconv.Itoa(daemon.DefaultClusterPort)),
			RouteListen: net.JoinHostPort("0.0.0.0", strconv.Itoa(daemon.DefaultRoutePort))},
	}
	cfg.Node, _ = os.Hostname()
	if edit != nil {
		edit(&cfg)
	}
	if cfg.Engine == "" && cfg.EngineRuntime == daemon.RuntimeDocker {
		cfg.Engine = "vllm"
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"qwen3-14b-fp8"}
	}
	cfg.Model = cfg.Models[0]
	if len(cfg.Aliases) == 0 {
		cfg.Aliases = map[string]string{"*": cfg.Model}
	}
	if cfg.KVStoreDir == "" {
		cfg.KVStoreDir = filepath.Join(cfg.DataDir, "kvstore")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startUp runs a daemon on two simulated 4090s, edited by edit, and
// returns once its engines are ready.
func startUp(t *testing.T, edit func(*daemon.Config)) (baseURL string, stop func() error) {
	t.Helper()
	return serveTestUp(t, simConfig(t, "2x4090", edit))
}

// serveTestUp runs the daemon with cfg, and opts when set, and returns
// once its engines are ready: when it prints the clients' settings.
func serveTestUp(t testing.TB, cfg daemon.Config, opts ...daemon.Option) (baseURL string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	printed := &firstWrite{c: make(chan struct{})}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("HEARTH_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	go func() { done <- daemon.Run(ctx, cfg, ln, printed, logger, opts...) }()
	select {
	case <-printed.c:
	case err := <-done:
		cancel()
		t.Fatalf("hearth up ended before its engines were ready: %v", err)
	}
	var once bool
	var result error
	stop = func() error {
		if !once {
			once = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("hearth up: %v", err)
		}
	})
	return cfg.Scheme() + "://" + ln.Addr().String(), stop
}

// firstWrite closes c when something is first written to it.
type firstWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

// listEngines is GET /api/v1/engines.
func listEngines(t *testing.T, baseURL string) []adminapi.Engine {
	t.Helper()
	resp, err := http.Get(baseURL + "/api/v1/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Engines []adminapi.Engine `json:"engines"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/v1/engines: %s, %v", resp.Status, err)
	}
	return list.Engines
}

// waitEngine waits until the engine name is as ok wants it.
func waitEngine(t *testing.T, baseURL, name string, bound time.Duration, ok func(adminapi.Engine) bool) adminapi.Engine {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		for _, e := range listEngines(t, baseURL) {
			if e.Name == name && ok(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %s: not as wanted within %v: %+v", name, bound, listEngines(t, baseURL))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
