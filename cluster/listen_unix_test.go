//go:build unix

package cluster

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fdChildEnv = "HEARTH_TEST_FD_CHILD"

// TestClusterPortFdChild is the node of TestClusterPortSurvivesFdExhaustion,
// run in a child process with a low file descriptor limit; it skips
// anywhere else.
func TestClusterPortFdChild(t *testing.T) {
	if os.Getenv(fdChildEnv) == "" {
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
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 128
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening %s\n", n.ClusterPort())
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
}

// The cluster port keeps answering once the process has run out of file
// descriptors and the connections that took them are gone.
func TestClusterPortSurvivesFdExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) != "" {
		t.Skip()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterPortFdChild$")
	cmd.Env = append(os.Environ(), fdChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("the child did not start: %s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)

	var conns []net.Conn
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // the child accepts what it can and runs out
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			clusterPortRequest(t, conn)
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster port does not answer after the connections closed: %v\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
