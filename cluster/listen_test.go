package cluster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// clusterPortRequest sends GET joinPath on conn (TLS) and reads the answer.
func clusterPortRequest(t *testing.T, conn net.Conn) {
	t.Helper()
	if _, err := io.WriteString(conn, "GET "+joinPath+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// A kept connection on the cluster port that carries no request is closed.
func TestClusterPortClosesIdleConnections(t *testing.T) {
	id, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Identity: id, Name: "a", ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0",
		IdleTimeout: 200 * time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	conn, err := tls.Dial("tcp", n.ClusterPort().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	clusterPortRequest(t, conn)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the cluster port kept an idle connection open for 5s")
	}
}
