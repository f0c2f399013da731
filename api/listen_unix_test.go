//go:build unix

package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fdChildEnv = "HEARTH_TEST_FD_CHILD"

// TestFdExhaustionChild is the server half of
// TestGatewaySurvivesFdExhaustion, run in a child process with a low
// file descriptor limit; it skips anywhere else.
func TestFdExhaustionChild(t *testing.T) {
	if os.Getenv(fdChildEnv) == "" {
		t.Skip("runs as TestGatewaySurvivesFdExhaustion's child")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
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
	fmt.Printf("listening %s\n", ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }() // the parent closes stdin to stop it
	if err := gw.Serve(ctx, ln); err != nil {
		t.Fatal(err)
	}
}

// The gateway keeps serving when the process runs out of file descriptors:
// accepting waits and tries again instead of ending the server.
func TestGatewaySurvivesFdExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) != "" {
		t.Skip()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFdExhaustionChild$", "-test.v")
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
	exited := make(chan error, 1)
	out := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out <- sc.Text()
		}
		close(out)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	var addr string
	for line := range out {
		if a, ok := strings.CutPrefix(line, "listening "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("the child did not start: %s", stderr.String())
	}
	var logged strings.Builder
	go func() {
		for line := range out {
			logged.WriteString(line + "\n")
		}
	}()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			select {
			case werr := <-exited:
				t.Fatalf("the child stopped with %v after its descriptors ran out:\n%s", werr, stderr.String())
			case <-time.After(2 * time.Second):
			}
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // the child accepts what it can and runs out
	select {
	case err := <-exited:
		t.Fatalf("the child stopped with %v after its descriptors ran out:\n%s%s", err, logged.String(), stderr.String())
	default:
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the child stopped with %v:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /health after the connections closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
