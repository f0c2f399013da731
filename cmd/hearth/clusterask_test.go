package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/daemon"
)

// askingDaemon starts hearth up --ask-join on a goroutine: it waits for
// the owner before it serves. Its log is returned; its end arrives on done.
func askingDaemon(t *testing.T, args []string) (base string, log *syncBuffer, done chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, args)
	if err != nil {
		t.Fatal(err)
	}
	log = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- serveUp(ctx, io.Discard, slog.New(slog.NewTextHandler(log, nil)), cfg, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("hearth up did not stop")
		}
	})
	return "http://" + ln.Addr().String(), log, done
}

// oneJoinRequest waits until the owner's API lists one join request.
func oneJoinRequest(t *testing.T, base string) adminapi.JoinRequest {
	t.Helper()
	var got adminapi.JoinRequestList
	clocktest.WaitFor(t, "a join request on "+base, 15*time.Second, func() bool {
		resp, err := http.Get(base + "/api/v1/cluster/join-requests")
		if err != nil {
			t.Fatal(err)
		}
		got = adminapi.JoinRequestList{}
		if err := decodeJSON(resp, &got); err != nil {
			t.Fatal(err)
		}
		return len(got.Requests) == 1
	})
	if !got.CanInvite {
		t.Fatalf("the inviter's API says it cannot invite: %+v", got)
	}
	return got.Requests[0]
}

// postAPI posts to a daemon's /api/v1 as the hearth command does on its
// machine: with the local token from its data directory.
func postAPI(t *testing.T, base, dataDir, path string) (*http.Response, error) {
	t.Helper()
	token, err := adminapi.ReadLocalToken(daemon.DataDir(dataDir).LocalToken())
	if err != nil || token == "" {
		t.Fatalf("no local token in %s: %v", dataDir, err)
	}
	req, err := http.NewRequest(http.MethodPost, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(adminapi.LocalTokenHeader, token)
	return http.DefaultClient.Do(req)
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	env := &environment{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}
	err := run(context.Background(), env, args)
	return out.String(), err
}

// TestAskJoinThroughTheAPI runs a daemon holding the cluster's CA and a
// second one started with --ask-join and no token: the owner lists the
// request with hearth cluster requests, sees the code the joiner logs,
// accepts it with hearth cluster accept, and the new node appears up in
// /api/v1/nodes. A third one, rejected with hearth cluster reject, ends
// with the rejection and keeps no identity.
func TestAskJoinThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts three daemons")
	}
	dirA := t.TempDir()
	portA := freePort(t)
	clusterToken(t, dirA, "a", fmt.Sprintf("127.0.0.1:%d", portA)) // creates the cluster
	common := []string{"--sim", "1x4090", "--speedup", "100", "--mdns=false", "--cluster-routes-listen", "127.0.0.1:0", "--policy", "round_robin"}
	baseA, _ := serveTestUp(t, append(common, "--node", "a", "--data-dir", dirA, "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", portA)))

	if out, err := runCLI(t, "cluster", "requests", "--addr", baseA); err != nil || !strings.Contains(out, "no join request is waiting") {
		t.Fatalf("hearth cluster requests with none: %v\n%s", err, out)
	}
	baseB, logB, doneB := askingDaemon(t, append(common, "--node", "b", "--data-dir", t.TempDir(), "--cluster-listen", "127.0.0.1:0",
		"--ask-join", fmt.Sprintf("127.0.0.1:%d", portA)))
	req := oneJoinRequest(t, baseA)
	if req.Name != "b" || req.Address != "127.0.0.1" {
		t.Fatalf("request: %+v", req)
	}
	clocktest.WaitFor(t, "b to log the code the owner sees", 5*time.Second, func() bool {
		return strings.Contains(logB.String(), "waiting for the owner to accept code "+req.Code+" on the console of a")
	})
	out, err := runCLI(t, "cluster", "requests", "--addr", baseA)
	if err != nil || !strings.Contains(out, req.ID) || !strings.Contains(out, req.Code) || !strings.Contains(out, " b ") {
		t.Fatalf("hearth cluster requests: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "cluster", "accept", req.ID, "--addr", baseA, "--data-dir", dirA); err != nil || !strings.Contains(out, req.ID) {
		t.Fatalf("hearth cluster accept: %v\n%s", err, out)
	}
	clocktest.WaitFor(t, "a to list b up", 20*time.Second, func() bool {
		for _, n := range getNodes(t, baseA).Nodes {
			if n.Name == "b" && n.State == "up" && len(n.Engines) == 1 {
				return true
			}
		}
		return false
	})
	select {
	case err := <-doneB:
		t.Fatalf("b ended: %v", err)
	default:
	}
	if a, b := getNodes(t, baseA), getNodes(t, baseB); a.Cluster == "" || b.Cluster != a.Cluster {
		t.Fatalf("clusters: a %q, b %q", a.Cluster, b.Cluster)
	}
	// Accepting again: a JSON error, as the API's others.
	resp, err := postAPI(t, baseA, dirA, "/api/v1/cluster/join-requests/"+req.ID+"/accept")
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := decodeJSON(resp, &e); err != nil || resp.StatusCode != http.StatusNotFound || e["error"] == nil {
		t.Fatalf("accepting twice: %d %v %v", resp.StatusCode, e, err)
	}
	// b holds no CA key: it takes no requests.
	if out, err := runCLI(t, "cluster", "requests", "--addr", baseB); err != nil || !strings.Contains(out, "does not hold the CA key") {
		t.Fatalf("hearth cluster requests on b: %v\n%s", err, out)
	}

	dirC := t.TempDir()
	_, _, doneC := askingDaemon(t, append(common, "--node", "c", "--data-dir", dirC, "--cluster-listen", "127.0.0.1:0",
		"--ask-join", fmt.Sprintf("127.0.0.1:%d", portA)))
	reqC := oneJoinRequest(t, baseA)
	if _, err := runCLI(t, "cluster", "reject", reqC.ID, "--addr", baseA, "--data-dir", dirA); err != nil {
		t.Fatalf("hearth cluster reject: %v", err)
	}
	select {
	case err := <-doneC:
		if !errors.Is(err, cluster.ErrJoinRejected) {
			t.Fatalf("hearth up --ask-join, rejected: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a rejected hearth up --ask-join did not end")
	}
	if _, err := cluster.Load(daemon.DataDir(dirC).Cluster()); !errors.Is(err, cluster.ErrNoCluster) {
		t.Fatalf("a rejected node holds an identity: %v", err)
	}
	doneC <- nil // the cleanup waits for one value
}

func TestAskJoinFlags(t *testing.T) {
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	_, err := parseUpFlags(env, []string{"--sim", "1x4090", "--join", "hearth1-x", "--ask-join", "10.0.0.1"})
	if !errors.Is(err, errUsage) {
		t.Fatalf("--join with --ask-join: %v", err)
	}
	for _, args := range [][]string{{"cluster", "accept"}, {"cluster", "reject"}} {
		if _, err := runCLI(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%v without an id: %v", args, err)
		}
	}
}
