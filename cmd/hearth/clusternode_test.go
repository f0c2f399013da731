package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/daemon"
)

func freePort(t *testing.T) int { return freePortTB(t) }

func freePortTB(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// clusterToken runs hearth cluster token and returns its last line.
func clusterToken(t *testing.T, dataDir, node, advertise string) string {
	return clusterTokenTB(t, dataDir, node, advertise)
}

func clusterTokenTB(t testing.TB, dataDir, node, advertise string) string {
	t.Helper()
	var out bytes.Buffer
	env := &environment{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}
	if err := run(context.Background(), env, []string{"cluster", "token", "--data-dir", dataDir, "--node", node, "--advertise", advertise}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

func mustParseToken(t *testing.T, s string) cluster.Token {
	t.Helper()
	tok, err := cluster.ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestClusterTokenRotate: hearth cluster token prints the same token
// until --rotate replaces the secret.
func TestClusterTokenRotate(t *testing.T) {
	dir := t.TempDir()
	first := clusterToken(t, dir, "a", "127.0.0.1:7443")
	if again := clusterToken(t, dir, "a", "127.0.0.1:7443"); again != first {
		t.Fatal("the token changed without --rotate")
	}
	var out bytes.Buffer
	env := &environment{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}
	if err := run(context.Background(), env, []string{"cluster", "token", "--rotate", "--data-dir", dir, "--advertise", "127.0.0.1:7443"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	rotated := lines[len(lines)-1]
	if rotated == first || mustParseToken(t, rotated).Fingerprint != mustParseToken(t, first).Fingerprint {
		t.Fatalf("after --rotate: %q, want a new secret of the same cluster", rotated)
	}
	if again := clusterToken(t, dir, "a", "127.0.0.1:7443"); again != rotated {
		t.Fatal("the rotated token did not last")
	}
}

func decodeJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func getNodes(t *testing.T, base string) adminapi.NodeList {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a adminapi.NodeList
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

// clusterChat sends one short chat turn and returns the worker that served it
// and the prompt blocks it held. Any answer but 200 fails the test: a turn
// through a peer's proxy must arrive whole.
func clusterChat(t *testing.T, base, policy, text string) (worker string, cached int) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"qwen3-14b-fp8","max_tokens":4,"messages":[{"role":"user","content":%q}]}`, text)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-hearth-policy", policy)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s (worker %q)", resp.StatusCode, b, resp.Header.Get("x-hearth-worker"))
	}
	cached, _ = strconv.Atoi(resp.Header.Get("x-hearth-cached-blocks"))
	return resp.Header.Get("x-hearth-worker"), cached
}

// checkConsoleClusterPage reads the console's Cluster page of a node
// (loopback without an owner's password: open, and without the join
// token) and its live fragment, and finds every node of want up, with its
// engine, and a link to each peer.
func checkConsoleClusterPage(t *testing.T, base string, want adminapi.NodeList) {
	t.Helper()
	get := func(path string, header map[string]string) string {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		if header == nil {
			if _, err := b.ReadFrom(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		// A live stream never ends: read up to the end of its first frame.
		for header != nil {
			buf := make([]byte, 32<<10)
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if i := strings.Index(b.String(), "data:"); i >= 0 && strings.Contains(b.String()[i:], "\n\n") {
				break
			}
			if err != nil {
				t.Fatalf("GET %s: %v after %q", path, err, b.String())
			}
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, b.String())
		}
		return b.String()
	}
	for _, page := range []struct{ path, body string }{
		{"/console/cluster", get("/console/cluster", nil)},
		{"/console/events/cluster", get("/console/events/cluster", map[string]string{"Accept": "text/event-stream"})},
	} {
		if got := strings.Count(page.body, `data-state="up"`); got != len(want.Nodes) {
			t.Errorf("%s shows %d nodes up, want %d:\n%s", page.path, got, len(want.Nodes), page.body)
		}
		for _, n := range want.Nodes {
			if !strings.Contains(page.body, `data-node="`+n.ID+`"`) {
				t.Errorf("%s lacks node %s (%s)", page.path, n.Name, n.ID)
			}
			for _, e := range n.Engines {
				worker := e.Name
				if !n.Self {
					worker = n.Name + "/" + e.Name[strings.LastIndexByte(e.Name, '/')+1:]
				}
				if !strings.Contains(page.body, ">"+worker+"<") {
					t.Errorf("%s lacks %s's engine %s", page.path, n.Name, worker)
				}
			}
		}
		if got := strings.Count(page.body, `class="link link-up"`); got != len(want.Nodes)-1 {
			t.Errorf("%s draws %d links up, want %d", page.path, got, len(want.Nodes)-1)
		}
		if strings.Contains(page.body, "hearth1-") {
			t.Errorf("%s shows the join token to a browser that is not the owner's", page.path)
		}
	}
}

// TestDaemonsFormACluster runs three hearth up --sim daemons on loopback:
// a prints a token, b and c join with it, every node's API lists the three
// nodes up with their engines, a request sent to a is served by c's GPU
// through c's proxy, c's KV events reach a's router (the next turn finds
// its prefix there), a wrong token is refused, and a node revoked through
// a's API is refused by b.
func TestDaemonsFormACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts three daemons")
	}
	dirA := t.TempDir()
	portA := freePort(t)
	token := clusterToken(t, dirA, "a", fmt.Sprintf("127.0.0.1:%d", portA))
	common := []string{"--sim", "1x4090", "--speedup", "100", "--mdns=false", "--cluster-routes-listen", "127.0.0.1:0", "--policy", "round_robin"}
	baseA, _ := serveTestUp(t, append(common, "--node", "a", "--data-dir", dirA, "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", portA)))
	dirB := t.TempDir()
	baseB, _ := serveTestUp(t, append(common, "--node", "b", "--data-dir", dirB, "--cluster-listen", "127.0.0.1:0", "--join", token))
	baseC, stopC := serveTestUp(t, append(common, "--node", "c", "--data-dir", t.TempDir(), "--cluster-listen", "127.0.0.1:0", "--join", token))

	for _, base := range []string{baseA, baseB, baseC} {
		clocktest.WaitFor(t, base+" to see three nodes up with an engine each", 10*time.Second, func() bool {
			a := getNodes(t, base)
			up := 0
			for _, n := range a.Nodes {
				if n.State == "up" && len(n.Engines) == 1 {
					up++
				}
			}
			return up == 3
		})
	}
	checkConsoleClusterPage(t, baseA, getNodes(t, baseA))
	var status bytes.Buffer
	env := &environment{stdout: &status, stderr: io.Discard, getenv: func(string) string { return "" }}
	if err := run(context.Background(), env, []string{"cluster", "status", "--addr", baseA}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "sim/gpu0") || strings.Count(status.String(), " up ") != 3 {
		t.Errorf("hearth cluster status:\n%s", status.String())
	}

	// Round robin over a's three workers: one request lands on c's GPU.
	// The nodes list shows a peer's engines as soon as its heartbeat
	// arrives; its worker follows a moment later, so allow a few rounds.
	served := map[string]bool{}
	for i := 0; i < 12 && len(served) < 3; i++ {
		w, _ := clusterChat(t, baseA, "round_robin", fmt.Sprintf("question %d about the cluster", i))
		served[w] = true
	}
	if !served["c/gpu0"] || !served["b/gpu0"] || !served["sim/gpu0"] {
		t.Fatalf("a's requests were served by %v, want sim/gpu0 (a's own), b/gpu0 and c/gpu0", served)
	}
	// A long prompt sent to a and served by c: its blocks come back to a
	// through c's relayed KV events, so a's KV-aware policy sends the same
	// prompt to c again, with its blocks cached.
	long := strings.Repeat("The cluster relays KV events between nodes. ", 60)
	var first string
	clocktest.WaitFor(t, "a turn served by c/gpu0", 5*time.Second, func() bool {
		first, _ = clusterChat(t, baseA, "round_robin", long)
		return first == "c/gpu0"
	})
	clocktest.WaitFor(t, "a's router to learn c's cached blocks", 5*time.Second, func() bool {
		w, cached := clusterChat(t, baseA, "kv", long)
		return w == "c/gpu0" && cached > 0
	})

	// A wrong token is refused and the joiner learns nothing.
	tok, err := cluster.ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	tok.Secret[0] ^= 1
	bad := tok.String()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	cfg, err := parseUpFlags(env, append(common, "--node", "x", "--data-dir", t.TempDir(), "--cluster-listen", "127.0.0.1:0", "--join", bad))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = serveUp(ctx, io.Discard, slog.New(slog.DiscardHandler), cfg, ln)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "not of the token's cluster") {
		t.Fatalf("hearth up --join with a wrong token: %v", err)
	}

	// Revoking c through a's API: b refuses it at once. A page in a
	// browser cannot do it: a cross-site POST, as a form or fetch sends
	// it, is refused, and so is a loopback POST without the local token.
	idC := getNodes(t, baseC).NodeID
	for _, header := range []map[string]string{
		{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
		{"Content-Type": "text/plain"},
	} {
		req, _ := http.NewRequest(http.MethodPost, baseA+"/api/v1/nodes/"+idC+"/revoke", strings.NewReader("x"))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("revoke with %v: %v %v, want 403", header, err, resp.Status)
		}
		resp.Body.Close()
	}
	resp, err := postAPI(t, baseA, dirA, "/api/v1/nodes/"+idC+"/revoke")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	clocktest.WaitFor(t, "b to see c revoked", 2*time.Second, func() bool {
		for _, n := range getNodes(t, baseB).Nodes {
			if n.ID == idC {
				return n.State == "revoked"
			}
		}
		return false
	})
	// Whoever kept the token c joined with cannot join again from a fresh
	// data directory, and a's token is a new one.
	if again := clusterToken(t, dirA, "a", fmt.Sprintf("127.0.0.1:%d", portA)); again == token {
		t.Error("hearth cluster token prints the same token after a revocation")
	}
	if _, err := cluster.Join(context.Background(), t.TempDir(), "c-again", mustParseToken(t, token)); !errors.Is(err, cluster.ErrTokenRotated) {
		t.Errorf("joining again with the revoked node's token: %v, want %v", err, cluster.ErrTokenRotated)
	}
	// The state is set before the engines are taken out; give that a
	// moment rather than race a request against it.
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 4; i++ {
		if w, _ := clusterChat(t, baseB, "round_robin", fmt.Sprintf("after revocation %d", i)); w == "c/gpu0" {
			t.Fatal("b routed to a revoked node's engine")
		}
	}
	_ = stopC

	// hearth cluster leave on b: a sees b revoked, and b keeps no identity.
	idB := getNodes(t, baseB).NodeID
	var left bytes.Buffer
	envLeave := &environment{stdout: &left, stderr: io.Discard, getenv: func(string) string { return "" }}
	if err := run(context.Background(), envLeave, []string{"cluster", "leave", "--addr", baseB, "--data-dir", dirB}); err != nil {
		t.Fatalf("hearth cluster leave: %v", err)
	}
	clocktest.WaitFor(t, "a to see b revoked after it left", 2*time.Second, func() bool {
		for _, n := range getNodes(t, baseA).Nodes {
			if n.ID == idB {
				return n.State == "revoked"
			}
		}
		return false
	})
	if _, err := cluster.Load(daemon.DataDir(dirB).Cluster()); !errors.Is(err, cluster.ErrNoCluster) {
		t.Fatalf("b still holds an identity after leaving: %v", err)
	}
}
