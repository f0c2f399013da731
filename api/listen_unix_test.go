//go:build unix

package api

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/netguard/netguardtest"
)

// TestFdExhaustionChild is the server half of
// TestGatewaySurvivesFdExhaustion, run in a child process with a low
// file descriptor limit; it skips anywhere else.
func TestFdExhaustionChild(t *testing.T) {
	if !netguardtest.InChild() {
		t.Skip("runs as TestGatewaySurvivesFdExhaustion's child")
	}
	netguardtest.LimitFiles(t, 64)
	gw, err := New(Config{
		Models: []string{servedModel},
		// Above the limit, so that accepting runs out of descriptors.
		MaxConns: 1000,
	}, Deps{Router: newFakeRouter(), Tokenizer: fakeTokenizer{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	netguardtest.Announce(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { netguardtest.WaitParent(); cancel() }()
	if err := gw.Serve(ctx, ln); err != nil {
		t.Fatal(err)
	}
}

// The gateway keeps serving when the process runs out of file descriptors:
// accepting waits and tries again instead of ending the server.
func TestGatewaySurvivesFdExhaustion(t *testing.T) {
	if netguardtest.InChild() {
		t.Skip()
	}
	child := netguardtest.StartChild(t, "TestFdExhaustionChild")
	child.Flood(t, 200)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("http://" + child.Addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		child.CheckAlive(t)
		if time.Now().After(deadline) {
			t.Fatalf("no /health after the connections closed: %v\n%s", err, child.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
