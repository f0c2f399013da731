//go:build unix

// Package netguardtest runs a server in a child process of the test binary
// with few file descriptors, for the tests that prove a listener survives
// running out of them. A parent test starts the child (StartChild) and
// floods it with idle connections; the child test limits its descriptors
// (LimitFiles), serves, says where (Announce) and serves until the parent
// closes its standard input (WaitParent).
package netguardtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const childEnv = "HEARTH_TEST_FD_CHILD"

// InChild reports whether the test binary runs as a child: the child test
// runs only then, the parent test never.
func InChild() bool { return os.Getenv(childEnv) != "" }

// LimitFiles lowers the process's soft limit of open files to n.
func LimitFiles(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

// Announce tells the parent the address the child serves on.
func Announce(addr net.Addr) { fmt.Printf("listening %s\n", addr) }

// WaitParent returns when the parent closes the child's standard input.
func WaitParent() { io.Copy(io.Discard, os.Stdin) }

// Child is the test binary running one test as a child process.
type Child struct {
	Addr   string
	exited chan error
	output SyncBuffer // its standard output after the address, and its standard error
}

// StartChild runs the test named test of this binary as a child process,
// waits until it announces its address, and stops it when t ends.
func StartChild(t *testing.T, test string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{exited: make(chan error, 1)}
	cmd.Stderr = &c.output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		announced := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok && !announced {
				addr <- a
				announced = true
				continue
			}
			c.output.Write([]byte(sc.Text() + "\n"))
		}
		c.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	select {
	case c.Addr = <-addr:
	case err := <-c.exited:
		t.Fatalf("the child did not start: %v\n%s", err, c.output.String())
	}
	return c
}

// CheckAlive fails the test if the child has stopped.
func (c *Child) CheckAlive(t testing.TB) {
	t.Helper()
	select {
	case err := <-c.exited:
		t.Fatalf("the child stopped with %v after its descriptors ran out:\n%s", err, c.output.String())
	default:
	}
}

// Flood opens n idle connections to the child, waits a second for it to
// accept what it can and run out of descriptors, checks it is alive and
// closes them.
func (c *Child) Flood(t testing.TB, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range n {
		conn, err := net.Dial("tcp", c.Addr)
		if err != nil {
			time.Sleep(2 * time.Second) // a child that died says so by then
			c.CheckAlive(t)
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	time.Sleep(time.Second)
	c.CheckAlive(t)
}

// Output is what the child wrote after its address.
func (c *Child) Output() string { return c.output.String() }

// SyncBuffer is a text buffer that goroutines may write while a test
// reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
