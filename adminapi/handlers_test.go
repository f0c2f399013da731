package adminapi

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func intp(n int) *int              { return &n }
func strp(s string) *string        { return &s }
func timep(t time.Time) *time.Time { return &t }

// sampleEngines: one engine loading with a figure, one failed with a
// diagnosis.
var sampleEngines = []Engine{
	{Name: "rig/gpu0", Runtime: "docker", Kind: "vllm", Model: "qwen3-14b-fp8", GPU: 0, GPUName: "RTX 4090", State: "loading",
		Container: "hearth-rig-gpu0", Image: "vllm/vllm-openai:v0.20.0", BaseURL: "http://127.0.0.1:8100", Phase: "capturing", Progress: intp(40),
		Since: t0},
	{Name: "rig/gpu1", Runtime: "process", Kind: "sglang", Model: "qwen3-14b-fp8", GPU: 1, State: "failed", PID: 4242,
		BaseURL: "http://127.0.0.1:8101", Restarts: 5, LastError: "exited: exit status 1: CUDA ran out of memory: lower --max-model-len",
		Cause: "out_of_memory", Since: t0.Add(time.Minute), KVBlocks: 1200},
}

var sampleSessions = fakeSessions{{
	ID: "s1", Client: "claude-code", Worker: "rig/gpu0", LastActive: t0, ContextTokens: 70,
	Turns: []Turn{
		{N: 1, Kind: "side", At: t0, Worker: "rig/gpu0", PromptTokens: 20, OutputTokens: 7},
		{N: 2, Kind: "turn", At: t0.Add(time.Second), Worker: "rig/gpu0", PromptTokens: 70, CachedTokens: 16, OutputTokens: 7, SharedBlocks: 1,
			DivergedAtBlock: intp(1), Cause: strp("prompt_changed"), Changed: &Change{Was: "Today is 2026-11-29.", Now: "Today is 2026-12-01."}},
	},
}}

func sampleCluster() *fakeCluster {
	return &fakeCluster{
		nodes: NodeList{Cluster: "c-1234", NodeID: "n-a", Nodes: []Node{
			{ID: "n-a", Name: "a", Address: "10.0.0.1:7443", State: "up", Self: true,
				GPUs:    []NodeGPU{{Index: 0, Name: "RTX 4090", MemoryMiB: 24564}},
				Engines: []NodeEngine{{Name: "a/gpu0", Model: "qwen3-14b-fp8", Incarnation: "i1", URL: "https://10.0.0.1:7443/engines/gpu0", CapacityBlocks: 900, Running: 1, State: "ready"}}},
			{ID: "n-b", Name: "b", Address: "10.0.0.2:7443", State: "lost", LastSeen: timep(t0), Drained: "manual"}, // no GPUs nor engines: []
		}},
		requests: JoinRequestList{Cluster: "c-1234", CanInvite: true, Requests: []JoinRequest{
			{ID: "r1", Name: "c", Address: "10.0.0.3", Code: "123456", Received: t0},
		}},
	}
}

func testApp(src Sources) *fiber.App {
	app := fiber.New()
	mount(app, func(c *fiber.Ctx) error { return c.Next() }, src, logStream{heartbeat: 10 * time.Millisecond, writeTimeout: time.Second})
	return app
}

// TestAnswers pins every answer of the API, bytes and status: the JSON
// shapes are the API's contract with scripts and the command line.
func TestAnswers(t *testing.T) {
	engines := &fakeEngines{list: sampleEngines, logs: map[string][]string{"rig/gpu0": {"INFO loading", "INFO capturing"}, "rig/gpu1": nil}}
	full := Sources{Engines: engines, Sessions: sampleSessions, Cluster: sampleCluster(), Drain: &fakeDrain{gpuTaken: "game.exe holds 8.0 GiB of GPU 0"}}
	alone := Sources{Engines: &fakeEngines{}, Sessions: fakeSessions(nil)}
	withErr := func(err error) Sources {
		cl := sampleCluster()
		cl.err = err
		return Sources{Engines: engines, Sessions: sampleSessions, Cluster: cl}
	}
	warned := sampleCluster()
	warned.leaveWarning = errors.New("cluster: nats: no servers available")
	cases := []struct {
		name, method, path string
		src                Sources
	}{
		{"engines", "GET", "/api/v1/engines", full},
		{"no engines", "GET", "/api/v1/engines", alone},
		{"logs", "GET", "/api/v1/engines/rig%2Fgpu0/logs", full},
		{"no lines yet", "GET", "/api/v1/engines/rig%2Fgpu1/logs", full},
		{"logs of an unknown engine", "GET", "/api/v1/engines/nope/logs", full},
		{"follow of an unknown engine", "GET", "/api/v1/engines/nope/logs?follow=1", full},
		{"sessions", "GET", "/api/v1/sessions", full},
		{"no sessions", "GET", "/api/v1/sessions", alone},
		{"nodes", "GET", "/api/v1/nodes", full},
		{"nodes without a cluster", "GET", "/api/v1/nodes", alone},
		{"join requests", "GET", "/api/v1/cluster/join-requests", full},
		{"join requests without a cluster", "GET", "/api/v1/cluster/join-requests", alone},
		{"revoke", "POST", "/api/v1/nodes/n-b/revoke", full},
		{"revoke an unknown node", "POST", "/api/v1/nodes/n-x/revoke", withErr(errors.New(`cluster: no node "n-x" is known`))},
		{"revoke without a cluster", "POST", "/api/v1/nodes/n-b/revoke", alone},
		{"accept", "POST", "/api/v1/cluster/join-requests/r1/accept", full},
		{"accept on a node without the CA key", "POST", "/api/v1/cluster/join-requests/r1/accept", withErr(Conflict(errors.New("this node does not hold the cluster's CA key")))},
		{"accept an unknown request", "POST", "/api/v1/cluster/join-requests/r9/accept", withErr(NotFound(errors.New(`no pending join request with that id: "r9"`)))},
		{"accept fails", "POST", "/api/v1/cluster/join-requests/r1/accept", withErr(errFlush)},
		{"accept without a cluster", "POST", "/api/v1/cluster/join-requests/r1/accept", alone},
		{"reject", "POST", "/api/v1/cluster/join-requests/r1/reject", full},
		{"leave", "POST", "/api/v1/cluster/leave", full},
		{"leave without telling the cluster", "POST", "/api/v1/cluster/leave", Sources{Engines: engines, Sessions: sampleSessions, Cluster: warned}},
		{"leave keeps the identity", "POST", "/api/v1/cluster/leave", withErr(errors.New("cluster: remove cluster/node.pem: permission denied"))},
		{"leave without a cluster", "POST", "/api/v1/cluster/leave", alone},
		{"node", "GET", "/api/v1/node", full},
		{"drain", "POST", "/api/v1/node/drain", full},
		{"undrain: the taken GPU keeps it drained", "POST", "/api/v1/node/undrain", full},
		{"node of a daemon that cannot drain", "GET", "/api/v1/node", alone},
		{"drain a daemon that cannot drain", "POST", "/api/v1/node/drain", alone},
	}
	var out strings.Builder
	for _, tc := range cases {
		resp, err := testApp(tc.src).Test(httptest.NewRequest(tc.method, tc.path, nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&out, "# %s\n%s %s\n%d %s\n%s\n\n", tc.name, tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	checkGolden(t, filepath.Join("testdata", "answers.txt"), out.String())
}

func TestOperationsReachTheCluster(t *testing.T) {
	cl := sampleCluster()
	app := testApp(Sources{Engines: &fakeEngines{}, Sessions: fakeSessions(nil), Cluster: cl})
	for _, path := range []string{"/api/v1/nodes/n%2Fb/revoke", "/api/v1/cluster/join-requests/r1/accept", "/api/v1/cluster/join-requests/r2/reject", "/api/v1/cluster/leave"} {
		resp, err := app.Test(httptest.NewRequest(http.MethodPost, path, nil))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %v %v", path, resp.Status, err)
		}
	}
	want := "revoke n%2Fb,accept r1,reject r2,leave"
	if got := strings.Join(cl.done, ","); got != want {
		t.Errorf("the cluster was asked %q, want %q", got, want)
	}
}

// TestGuardKeepsEveryRoute: no route answers past the guard.
func TestGuardKeepsEveryRoute(t *testing.T) {
	app := fiber.New()
	var routes []fiber.Route
	deny := func(c *fiber.Ctx) error { return c.Status(http.StatusUnauthorized).SendString("no key") }
	src := Sources{Engines: &fakeEngines{list: sampleEngines}, Sessions: sampleSessions, Cluster: sampleCluster(), Drain: &fakeDrain{}}
	Mount(app, deny, src)
	for _, r := range app.GetRoutes(true) {
		routes = append(routes, r)
	}
	if len(routes) < 12 {
		t.Fatalf("%d routes mounted, want the API's 12", len(routes))
	}
	for _, r := range routes {
		path := strings.NewReplacer(":name", "rig", ":id", "x").Replace(r.Path)
		resp, err := app.Test(httptest.NewRequest(r.Method, path, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s past the guard: %s", r.Method, r.Path, resp.Status)
		}
	}
}

// checkGolden compares out with the golden file at path (-update rewrites
// it).
func checkGolden(t *testing.T, path, out string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != out {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, out)
	}
}
