package main

import (
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
)

// startUpWithConsole runs hearth up on two simulated 4090s with the
// console sampling every interval and its charts reaching back chartWindow
// (0: the defaults).
func startUpWithConsole(t *testing.T, interval, chartWindow time.Duration) string {
	t.Helper()
	baseURL, _ := serveTestUp(t, []string{"--sim", "2x4090", "--speedup", "20", "--data-dir", t.TempDir()}, daemon.WithConsoleTiming(interval, chartWindow))
	return baseURL
}

// Shared with the other tests of a running daemon.
var (
	get          = daemontest.Get
	waitLive     = daemontest.WaitLive
	postMessages = daemontest.PostMessages
)
