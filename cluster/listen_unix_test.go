//go:build unix

package cluster

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/netguard/netguardtest"
)

// TestClusterPortFdChild is the node of TestClusterPortSurvivesFdExhaustion,
// run in a child process with a low file descriptor limit; it skips
// anywhere else.
func TestClusterPortFdChild(t *testing.T) {
	if !netguardtest.InChild() {
		t.Skip("runs as TestClusterPortSurvivesFdExhaustion's child")
	}
	id, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Identity: id, Name: "a", ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0",
		MaxConns: 1000, // above the limit, so that accepting runs out of descriptors
		Logger:   quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	netguardtest.LimitFiles(t, 128)
	netguardtest.Announce(n.ClusterPort())
	netguardtest.WaitParent()
}

// The cluster port keeps answering once the process has run out of file
// descriptors and the connections that took them are gone.
func TestClusterPortSurvivesFdExhaustion(t *testing.T) {
	if netguardtest.InChild() {
		t.Skip()
	}
	child := netguardtest.StartChild(t, "TestClusterPortFdChild")
	child.Flood(t, 300)
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", child.Addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			clusterPortRequest(t, conn)
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster port does not answer after the connections closed: %v\n%s", err, child.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
