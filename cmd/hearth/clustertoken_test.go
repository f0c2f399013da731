package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/daemon"
)

// TestClusterTokenTellsARunningDaemonToRestart: hearth up reads the
// cluster at start, so a daemon that serves in no cluster (or in another)
// when hearth cluster token makes one stays out of it until restarted:
// the command says so. A daemon in the cluster, or none, gets no word.
func TestClusterTokenTellsARunningDaemonToRestart(t *testing.T) {
	dataDir := t.TempDir()
	var answer adminapi.NodeList
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(answer)
	}))
	defer d.Close()
	token := func(addr string) (string, string) {
		t.Helper()
		out, errOut, err := runHearth(t, "", "cluster", "token", "--data-dir", dataDir, "--node", "a", "--advertise", "127.0.0.1:7443", "--addr", addr)
		if err != nil {
			t.Fatalf("cluster token: %v\n%s%s", err, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if _, err := cluster.ParseToken(lines[len(lines)-1]); err != nil {
			t.Fatalf("the last line is no token: %v\n%s", err, out)
		}
		return out, errOut
	}

	// A daemon in no cluster: told to restart, on stderr.
	_, errOut := token(d.URL)
	if !strings.Contains(errOut, "restart") || !strings.Contains(errOut, d.URL) {
		t.Errorf("a daemon in no cluster: no word to restart it:\n%s", errOut)
	}
	id, err := cluster.Load(daemon.DataDir(dataDir).Cluster())
	if err != nil {
		t.Fatal(err)
	}
	// A daemon in the cluster: nothing to say.
	answer = adminapi.NodeList{Cluster: id.ClusterID(), NodeID: id.NodeID()}
	if _, errOut := token(d.URL); strings.Contains(errOut, "restart") {
		t.Errorf("a daemon in the cluster told to restart:\n%s", errOut)
	}
	// No daemon: nothing to say either.
	d.Close()
	if _, errOut := token(d.URL); strings.Contains(errOut, "restart") {
		t.Errorf("no daemon, yet told to restart:\n%s", errOut)
	}
}
