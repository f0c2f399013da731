package console

import (
	"bytes"
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/console/components"
)

func TestClusterBodyVM(t *testing.T) {
	cfg := Config{BasePath: "/console"}
	vm := clusterBodyVM(cfg, threeNodes(t0).cluster, t0)

	var names, states, seen []string
	for _, n := range vm.Nodes {
		names = append(names, n.Name)
		states = append(states, n.State+"/"+n.StateClass)
		seen = append(seen, n.Seen)
	}
	// This node first, then its peers by name.
	if want := []string{"rig0", "rig1", "rig2"}; !slices.Equal(names, want) {
		t.Errorf("nodes in order %v, want %v", names, want)
	}
	if want := []string{"up/good", "up/good", "down/bad"}; !slices.Equal(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	if want := []string{"", "last seen 1 s ago", "last seen 42 s ago"}; !slices.Equal(seen, want) {
		t.Errorf("last seen %v, want %v", seen, want)
	}
	if vm.Summary != "3 nodes: 2 up, 1 down" {
		t.Errorf("summary %q", vm.Summary)
	}
	if vm.Nodes[0].CanRevoke || !vm.Nodes[1].CanRevoke || !vm.Nodes[2].CanRevoke {
		t.Errorf("revocable: self %v, peers %v %v; want only the peers", vm.Nodes[0].CanRevoke, vm.Nodes[1].CanRevoke, vm.Nodes[2].CanRevoke)
	}
	if got := vm.Nodes[1].RevokeURL; got != "/console/cluster/nodes/n-up/revoke" {
		t.Errorf("revoke URL %q", got)
	}
	if e := vm.Nodes[1].Engines; len(e) != 2 || e[0].Worker != "rig1/gpu0" || e[0].Running != 1 {
		t.Errorf("rig1's engines %+v", e)
	}
	// The map: this node and a link to each peer, styled by its state.
	if len(vm.Map.Nodes) != 3 || len(vm.Map.Links) != 2 {
		t.Fatalf("map has %d nodes and %d links, want 3 and 2", len(vm.Map.Nodes), len(vm.Map.Links))
	}
	if !vm.Map.Nodes[0].Self || vm.Map.Links[0].State != NodeUp || vm.Map.Links[1].State != NodeDown {
		t.Errorf("map %+v", vm.Map)
	}
	for _, l := range vm.Map.Links {
		if l.X1 >= l.X2 || l.Y1 < 0 || l.Y2 > vm.Map.Height {
			t.Errorf("link %+v leaves the map of %dx%d", l, vm.Map.Width, vm.Map.Height)
		}
	}
	if len(vm.Requests) != 1 || vm.Requests[0].Code != "482-193" || vm.Requests[0].Received != "12 s ago" ||
		vm.Requests[0].AcceptURL != "/console/cluster/joins/jr-1/accept" {
		t.Errorf("join requests %+v", vm.Requests)
	}
}

func TestClusterVMEdges(t *testing.T) {
	cfg := Config{BasePath: "/console"}
	tests := []struct {
		name    string
		cluster Cluster
		check   func(t *testing.T, vm components.ClusterVM)
	}{
		{"alone", Cluster{ID: "c", Nodes: []ClusterNode{{ID: "a", Name: "a", State: NodeUp, Self: true}}},
			func(t *testing.T, vm components.ClusterVM) {
				if vm.Summary != "1 node: 1 up" || len(vm.Map.Links) != 0 || len(vm.Map.Nodes) != 1 {
					t.Errorf("summary %q, map %+v", vm.Summary, vm.Map)
				}
			}},
		{"self not listed yet", Cluster{ID: "c", Nodes: []ClusterNode{{ID: "b", Name: "b", State: NodeSuspect, LastSeen: t0.Add(-3 * time.Second)}}},
			func(t *testing.T, vm components.ClusterVM) {
				if len(vm.Map.Links) != 0 || len(vm.Map.Nodes) != 1 || vm.Nodes[0].StateClass != "warn" {
					t.Errorf("map %+v, nodes %+v", vm.Map, vm.Nodes)
				}
			}},
		{"revoked and unnamed", Cluster{ID: "c", Nodes: []ClusterNode{
			{ID: "a", Name: "a", State: NodeUp, Self: true},
			{ID: "x/../y", State: NodeRevoked},
		}}, func(t *testing.T, vm components.ClusterVM) {
			n := vm.Nodes[1]
			if n.Name != "x/../y" || n.CanRevoke || n.Seen != "never heard from" || n.RevokeURL != "/console/cluster/nodes/x%2F..%2Fy/revoke" {
				t.Errorf("revoked node %+v", n)
			}
			if vm.Summary != "2 nodes: 1 up, 1 revoked" {
				t.Errorf("summary %q", vm.Summary)
			}
		}},
		{"requests oldest first", Cluster{ID: "c", JoinRequests: []JoinRequest{
			{ID: "new", Received: t0.Add(-time.Second)}, {ID: "old", Received: t0.Add(-2 * time.Minute)},
		}}, func(t *testing.T, vm components.ClusterVM) {
			if len(vm.Requests) != 2 || vm.Requests[0].ID != "old" || vm.Requests[0].Received != "2 min ago" || vm.Requests[1].Received != "1 s ago" {
				t.Errorf("requests %+v", vm.Requests)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, clusterBodyVM(cfg, tc.cluster, t0)) })
	}
}

func TestFmtSeen(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "just now"}, {0, "just now"}, {999 * time.Millisecond, "just now"},
		{2500 * time.Millisecond, "2 s ago"}, {59 * time.Second, "59 s ago"}, {90 * time.Second, "1 min ago"}, {3 * time.Hour, "3 h ago"},
	} {
		if got := fmtSeen(tc.d); got != tc.want {
			t.Errorf("fmtSeen(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// clusterHarness is a console of a cluster node with an owner's password
// set; the cookie is the owner's session.
func clusterHarness(t *testing.T, src *fakeCluster) (*harness, *http.Cookie) {
	t.Helper()
	h := newHarness(t, nil, withKeyRequired(false), withOwner(), withCluster(src))
	return h, setUpOwner(t, h, "a long owner password")
}

func TestClusterPagesGolden(t *testing.T) {
	tests := []struct {
		name    string
		cluster func() *fakeCluster // nil: no cluster
		owner   bool                // log in as the owner first
		path    string
		want    []string
		lacks   []string
	}{
		{name: "cluster-none", path: "/console/cluster",
			want:  []string{"This node belongs to no cluster", "hearth cluster token", "hearth up --join TOKEN", `aria-current="page">Cluster<`},
			lacks: []string{"hx-sse:connect"}},
		{name: "cluster-owner", cluster: func() *fakeCluster { return threeNodes(t0) }, owner: true, path: "/console/cluster",
			want: []string{`hx-sse:connect="/console/events/cluster"`, "hearth up --join " + testJoinToken, `data-copy="#join-command"`,
				"<section class=\"cluster\" data-owner>", "3 nodes: 2 up, 1 down", "last seen 42 s ago", "this node",
				"RTX 3090 24 GiB", "rig1/gpu1", "482-193", "Compare this code with the one printed on the joining machine",
				`hx-post="/console/cluster/nodes/n-down/revoke"`, `hx-post="/console/cluster/joins/jr-1/accept"`, `hx-confirm="Revoke node rig2?`,
				`class="link link-down"`, `<svg class="cluster-map"`},
			lacks: []string{`hx-post="/console/cluster/nodes/n-self/revoke"`}},
		{name: "cluster-open", cluster: func() *fakeCluster { return threeNodes(t0) }, path: "/console/cluster",
			want:  []string{"Set the owner's password", "<section class=\"cluster\">", "rig2"},
			lacks: []string{testJoinToken, "data-owner"}},
		{name: "cluster-follower", cluster: func() *fakeCluster {
			f := threeNodes(t0)
			f.cluster.JoinToken = ""
			f.cluster.JoinRequests = nil
			return f
		}, owner: true, path: "/console/cluster",
			want: []string{"This node cannot invite", "hearth cluster token"}, lacks: []string{"Asking to join", "hearth up --join"}},
		{name: "cluster-error", cluster: func() *fakeCluster { return &fakeCluster{err: errors.New("plane stopped")} }, owner: true, path: "/console/cluster",
			want: []string{"Cannot read the cluster: plane stopped"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := []harnessOption{withKeyRequired(false), withOwner()}
			if tc.cluster != nil {
				opts = append(opts, withCluster(tc.cluster()))
			}
			h := newHarness(t, nil, opts...)
			var cookie *http.Cookie
			if tc.owner {
				cookie = setUpOwner(t, h, "a long owner password")
			}
			resp, body := h.do(t, request{path: tc.path, cookie: cookie})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d\n%s", resp.StatusCode, body)
			}
			checkPage(t, tc.name+".html", body, tc.want, tc.lacks)
		})
	}
}

// TestClusterLiveFragment checks the pushed part: the same for every
// browser, so it must never hold the join token.
func TestClusterLiveFragment(t *testing.T) {
	src := threeNodes(t0)
	h := newHarness(t, nil, withKeyRequired(false), withCluster(src))
	frames := map[Topic][]byte{}
	h.c.produce(context.Background(), t0, []Topic{TopicCluster}, func(topic Topic, b []byte) { frames[topic] = b })
	frame := frames[TopicCluster]
	if frame == nil {
		t.Fatal("no cluster fragment produced")
	}
	if bytes.Contains(frame, []byte(testJoinToken)) {
		t.Fatal("the live fragment holds the join token")
	}
	for _, want := range []string{"rig0", "rig1", "rig2", "482-193", "last seen 42 s ago"} {
		if !bytes.Contains(frame, []byte(want)) {
			t.Errorf("fragment lacks %q", want)
		}
	}
	checkGolden(t, "cluster-fragment.html", frame)

	// A node going down shows on the next push.
	src.mu.Lock()
	src.cluster.Nodes[2].State, src.cluster.Nodes[2].LastSeen = NodeSuspect, t0.Add(-3*time.Second)
	src.mu.Unlock()
	h.c.produce(context.Background(), t0, []Topic{TopicCluster}, func(topic Topic, b []byte) { frames[topic] = b })
	if !bytes.Contains(frames[TopicCluster], []byte(`class="link link-suspect"`)) {
		t.Error("a suspect peer's link is not drawn as suspect")
	}
}

// TestClusterActions: revoking, accepting and rejecting need an owner's
// session and a request the console can prove is its own.
func TestClusterActions(t *testing.T) {
	hx := map[string]string{"HX-Request": "true"}
	type step struct {
		path    string
		header  map[string]string
		session string // "owner", "none", "key"
		// noOrigin sends the POST without Origin (with HX-Request unless
		// header says otherwise).
		noOrigin bool
	}
	tests := []struct {
		name        string
		src         func() *fakeCluster
		step        step
		status      int
		want        string
		wantActions []string
	}{
		{"revoke a peer", nil, step{path: "/cluster/nodes/n-up/revoke", header: hx, session: "owner"}, 200, "Revoked node rig1", []string{"revoke:n-up"}},
		{"revoke a down peer, plain form", nil, step{path: "/cluster/nodes/n-down/revoke", session: "owner"}, 200, "Revoked node rig2", []string{"revoke:n-down"}},
		{"accept", nil, step{path: "/cluster/joins/jr-1/accept", header: hx, session: "owner"}, 200, "Accepted laptop (192.168.1.30:7443)", []string{"accept:jr-1"}},
		{"reject", nil, step{path: "/cluster/joins/jr-1/reject", header: hx, session: "owner"}, 200, "Rejected laptop", []string{"reject:jr-1"}},
		{"revoke an id that needs escaping", func() *fakeCluster {
			f := threeNodes(t0)
			f.cluster.Nodes = append(f.cluster.Nodes, ClusterNode{ID: "n/ü", Name: "odd", State: NodeDown})
			return f
		}, step{path: "/cluster/nodes/" + url.PathEscape("n/ü") + "/revoke", header: hx, session: "owner"}, 200, "Revoked node odd", []string{"revoke:n/ü"}},
		{"revoke self", nil, step{path: "/cluster/nodes/n-self/revoke", header: hx, session: "owner"}, 422, "hearth cluster leave", nil},
		{"revoke unknown", nil, step{path: "/cluster/nodes/n-nobody/revoke", header: hx, session: "owner"}, 404, "no such node", nil},
		{"accept answered", nil, step{path: "/cluster/joins/jr-9/accept", header: hx, session: "owner"}, 404, "no such join request", nil},
		{"accept unsupported", func() *fakeCluster { f := threeNodes(t0); f.noJoins = true; return f },
			step{path: "/cluster/joins/jr-1/accept", header: hx, session: "owner"}, 501, "takes no join requests", nil},
		{"revoke failing", func() *fakeCluster {
			f := threeNodes(t0)
			f.actionErr = errors.New("nats: connection closed")
			return f
		},
			step{path: "/cluster/nodes/n-up/revoke", header: hx, session: "owner"}, 500, "nats: connection closed", nil},
		// The guards.
		{"loopback without a session", nil, step{path: "/cluster/nodes/n-up/revoke", header: hx, session: "none"}, 403, "Only the console's owner", nil},
		{"admin key login", nil, step{path: "/cluster/joins/jr-1/accept", header: hx, session: "key"}, 403, "Only the console's owner", nil},
		{"owner, cross-site", nil, step{path: "/cluster/nodes/n-up/revoke", session: "owner",
			header: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}}, 403, "cross-site request refused", nil},
		{"owner, other origin", nil, step{path: "/cluster/joins/jr-1/accept", session: "owner",
			header: map[string]string{"Origin": "http://evil.example"}}, 403, "cross-origin request refused", nil},
		{"owner, no proof of origin", nil, step{path: "/cluster/nodes/n-up/revoke", session: "owner", noOrigin: true}, 403, "neither an Origin header nor HX-Request", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := threeNodes(t0)
			if tc.src != nil {
				src = tc.src()
			}
			var h *harness
			var cookie *http.Cookie
			switch tc.step.session {
			case "owner":
				h, cookie = clusterHarness(t, src)
			case "none":
				h = newHarness(t, nil, withKeyRequired(false), withOwner(), withCluster(src))
			case "key":
				// Before an owner's password is set, an admin key opens
				// the console; it does not open the cluster's controls.
				h = newHarness(t, nil, withKeyRequired(true), withCluster(src))
				_, secret, err := h.store.CreateScopedKey(t.Context(), "ops", apikey.ScopeAdmin)
				if err != nil {
					t.Fatal(err)
				}
				resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}})
				if cookie = sessionCookie(resp); cookie == nil {
					t.Fatalf("admin key login: status %d, no cookie", resp.StatusCode)
				}
			}
			resp, body := h.do(t, request{method: "POST", path: "/console" + tc.step.path, form: url.Values{},
				header: tc.step.header, cookie: cookie, noOrigin: tc.step.noOrigin})
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, tc.status, body)
			}
			if !strings.Contains(html.UnescapeString(body), tc.want) {
				t.Errorf("answer lacks %q:\n%s", tc.want, body)
			}
			if got := src.actions(); !slices.Equal(got, tc.wantActions) {
				t.Errorf("the source was asked %v, want %v", got, tc.wantActions)
			}
			if tc.step.header["HX-Request"] == "" && tc.status == 200 && !strings.Contains(body, "<!doctype html>") {
				t.Error("a plain form post did not get the whole page back")
			}
		})
	}
}

// TestClusterActionsWithoutCluster: a node in no cluster has nothing to
// revoke or accept.
func TestClusterActionsWithoutCluster(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(false), withOwner())
	cookie := setUpOwner(t, h, "a long owner password")
	for _, p := range []string{"/console/cluster/nodes/x/revoke", "/console/cluster/joins/x/accept", "/console/cluster/joins/x/reject"} {
		resp, body := h.do(t, request{method: "POST", path: p, cookie: cookie, header: map[string]string{"HX-Request": "true"}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "no cluster") {
			t.Errorf("POST %s: %d %s", p, resp.StatusCode, body)
		}
	}
}
