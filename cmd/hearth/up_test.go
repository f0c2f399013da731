package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
)

// serveTestUp runs the daemon with a command line, and opts when set,
// and returns once its engines are ready: when it prints the clients'
// settings.
func serveTestUp(t testing.TB, args []string, opts ...daemon.Option) (baseURL string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	// The tests of a running daemon keep the layout they were written
	// for, one engine per GPU, unless args ask for another.
	cfg, err := parseUpFlags(env, append([]string{"--layout", daemon.LayoutPerGPU}, args...))
	if err != nil {
		t.Fatal(err)
	}
	stop = daemontest.Start(t, func(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
		return serveUp(ctx, stdout, log, cfg, ln, opts...)
	})
	return cfg.Scheme() + "://" + ln.Addr().String(), stop
}

// serveUp runs the daemon as hearth up does, with cfg from parseUpFlags.
func serveUp(ctx context.Context, stdout io.Writer, log *slog.Logger, cfg daemon.Config, ln net.Listener, opts ...daemon.Option) error {
	return daemon.Run(ctx, cfg, ln, stdout, log, opts...)
}
