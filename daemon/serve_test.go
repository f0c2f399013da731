package daemon_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
)

// upConfig is the Config hearth up's flags give for
// `--sim 2x4090 --speedup 100 --data-dir <temp> --layout per-gpu` (the
// layout the tests of a running daemon were written for) and then args (a flag
// given again wins, a repeatable one adds): simulated engines in the
// daemon, the default model of a 24 GB board and the flags' defaults.
func upConfig(t testing.TB, args ...string) daemon.Config {
	t.Helper()
	cfg := daemon.Config{Version: "dev"}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	base := []string{"--sim", "2x4090", "--speedup", "100", "--data-dir", t.TempDir(), "--layout", daemon.LayoutPerGPU}
	if _, err := daemon.RegisterFlags(fs, &cfg, daemon.Env{}).Parse(append(base, args...)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Complete(daemon.Env{}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startUp runs a daemon of upConfig(args), two simulated 4090s unless
// args say otherwise, and returns once its engines are ready.
func startUp(t *testing.T, args ...string) (baseURL string, stop func() error) {
	t.Helper()
	return serveTestUp(t, upConfig(t, args...))
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
