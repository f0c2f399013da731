package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
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
	stop = daemontest.Start(t, func(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
		return daemon.Run(ctx, cfg, ln, stdout, log, opts...)
	})
	return cfg.Scheme() + "://" + ln.Addr().String(), stop
}

// Shared with the other tests of a running daemon.
var (
	listEngines = daemontest.ListEngines
	waitEngine  = daemontest.WaitEngine
)
