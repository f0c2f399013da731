//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// streamChat sends a streamed chat request and reads it to its end. It
// returns the worker that served it and the stream's body.
func streamChat(ctx context.Context, baseURL, session, policy string, maxTokens int, started chan<- struct{}) (worker, body string, err error) {
	reqBody := fmt.Sprintf(`{"model":"qwen3-14b-fp8","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"Session %s: write out a long explanation of how a paged KV cache evicts blocks."}]}`, maxTokens, session)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(reqBody))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-session-id", session)
	if policy != "" {
		req.Header.Set("x-hearth-policy", policy)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	worker = resp.Header.Get("x-hearth-worker")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return worker, string(b), fmt.Errorf("status %s", resp.Status)
	}
	var buf bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	signalled := false
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
		if !signalled && strings.Contains(sc.Text(), `"content"`) && started != nil {
			started <- struct{}{}
			signalled = true
		}
	}
	if !signalled && started != nil {
		started <- struct{}{}
	}
	return worker, buf.String(), sc.Err()
}

// TestProcessEngineKilledMidStream is the fault an engine's crash is:
// hearth up --sim 2x4090 --engine-runtime process, 16 streams running, one
// engine's process killed with SIGKILL. No client hangs; the streams on the
// dead engine end with an error event; new requests go to the live engine;
// the dead one is restarted and takes traffic again; and once the daemon
// stops, no goroutine or file descriptor is left behind.
func TestProcessEngineKilledMidStream(t *testing.T) {
	exe := hearthBinary(t)
	t.Setenv(asHearthEnv, "1") // the engines are this binary as hearth sim-engine
	leaks := goleak.IgnoreCurrent()
	http.DefaultClient.CloseIdleConnections()
	fds := openFDs(t)

	baseURL, stop := serveTestUp(t, []string{"--sim", "2x4090", "--engine-runtime", "process", "--speedup", "4",
		"--data-dir", t.TempDir(), "--stop-timeout", "10s"}, daemon.WithHearthBinary(exe), daemon.WithBackoff(hruntime.Backoff{Initial: 200 * time.Millisecond}))
	engines := listEngines(t, baseURL)
	if len(engines) != 2 {
		t.Fatalf("engines: %+v, want 2", engines)
	}
	for _, e := range engines {
		if e.State != "ready" || e.Runtime != "process" || e.PID <= 0 {
			t.Fatalf("engine %+v: want ready, a child process", e)
		}
	}

	victim := engines[0]
	back := killUnderLoad(t, baseURL, victim, func() error { return syscall.Kill(victim.PID, syscall.SIGKILL) })
	if back.PID == victim.PID {
		t.Errorf("restarted engine has the dead one's PID %d", back.PID)
	}

	if err := stop(); err != nil {
		t.Fatalf("hearth up: %v", err)
	}
	for _, e := range []int{back.PID, engines[1].PID} {
		if processAlive(e) {
			t.Errorf("engine process %d still runs after the daemon stopped", e)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if err := goleak.Find(leaks,
		// fasthttp's idle-worker cleaner sleeps out its period after the server stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2")); err != nil {
		t.Errorf("goroutines left after hearth up stopped: %v", err)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d file descriptors open after hearth up stopped, %d before", n, fds)
	}
}

// killUnderLoad runs 16 long streams over round-robin routing, kills the
// victim engine with kill once all of them are streaming, and checks what
// clients see: no stream hangs, the streams on the victim end with an error
// event, those on the others complete, a new request is served meanwhile,
// and the victim comes back (restarted once more) and takes traffic again. It
// returns the victim as it is back.
func killUnderLoad(t *testing.T, baseURL string, victim adminapi.Engine, kill func() error) adminapi.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang
	defer cancel()
	type result struct {
		worker, body string
		err          error
	}
	results := make([]result, 16)
	started := make(chan struct{}, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			w, body, err := streamChat(ctx, baseURL, fmt.Sprintf("s%02d", i), "round_robin", 2000, started)
			results[i] = result{w, body, err}
		})
	}
	for range results {
		<-started
	}
	if err := kill(); err != nil {
		t.Fatalf("killing %s: %v", victim.Name, err)
	}
	wg.Wait() // no stream hangs: each ends, cut or complete
	if ctx.Err() != nil {
		t.Fatal("streams still open two minutes after the engine died")
	}
	cut := 0
	for i, r := range results {
		switch {
		case r.worker == victim.Name && strings.Contains(r.body, `"error"`):
			cut++
		case r.worker == victim.Name:
			// An answer may end before the kill lands (the simulated
			// engine chooses its length): then it ends whole.
			if !strings.Contains(r.body, "[DONE]") {
				t.Errorf("stream %d on the killed engine ended neither with an error event nor whole:\n%s", i, tail(r.body))
			}
		case r.err != nil:
			t.Errorf("stream %d on %s: %v", i, r.worker, r.err)
		case !strings.Contains(r.body, "[DONE]"):
			t.Errorf("stream %d on the live engine %s did not complete:\n%s", i, r.worker, tail(r.body))
		}
	}
	if cut == 0 {
		t.Fatal("no stream ran on the killed engine")
	}

	// A new request is served meanwhile: by the live engine, or by the
	// dead one's successor once it is back.
	if w, _, err := streamChat(context.Background(), baseURL, "after-kill", "", 5, nil); err != nil {
		t.Errorf("a request after the kill, on %q: %v", w, err)
	}

	// The dead engine is back, restarted once since the kill (a start that
	// failed before it, on a loaded machine, counts apart), and serves again.
	back := waitEngine(t, baseURL, victim.Name, time.Minute, func(e adminapi.Engine) bool {
		return e.State == "ready" && e.Restarts == victim.Restarts+1
	})
	served := map[string]bool{}
	for i := range 4 {
		w, _, err := streamChat(context.Background(), baseURL, fmt.Sprintf("back%d", i), "round_robin", 5, nil)
		if err != nil {
			t.Fatalf("request after the restart: %v", err)
		}
		served[w] = true
	}
	if !served[victim.Name] {
		t.Errorf("the restarted engine took no traffic: %v", served)
	}
	return back
}

func tail(s string) string {
	if len(s) > 600 {
		return "…" + s[len(s)-600:]
	}
	return s
}

// processAlive reports whether pid runs (a zombie waiting for its parent to
// reap it does not count).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// TestEngineFailingAtStartIsGivenUpOn: an engine whose process dies at
// start five times is marked failed with its last log lines, the other
// engine serves, and with no engine left a request gets 503 with the
// reason and Retry-After.
func TestEngineFailingAtStartIsGivenUpOn(t *testing.T) {
	exe := hearthBinary(t)
	t.Parallel()
	oom := []string{"/bin/sh", "-c", "echo 'loading weights'; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB' >&2; exit 1"}
	for _, tc := range []struct {
		name    string
		failing map[string]bool
	}{
		{"one of two", map[string]bool{"sim/gpu0": true}},
		{"both", map[string]bool{"sim/gpu0": true, "sim/gpu1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			baseURL, _ := serveTestUp(t, []string{"--sim", "2x4090", "--engine-runtime", "process", "--speedup", "50",
				"--data-dir", t.TempDir()}, daemon.WithHearthBinary(exe), daemon.WithBackoff(hruntime.Backoff{Initial: 10 * time.Millisecond}),
				daemon.WithSpecHook(func(s *hruntime.Spec) {
					asHearthEngine(s)
					if tc.failing[s.Name] {
						s.Command = oom
					}
				}))
			for _, e := range listEngines(t, baseURL) {
				want := "ready"
				if tc.failing[e.Name] {
					want = "failed"
				}
				if e.State != want {
					t.Fatalf("engine %s is %s, want %s: %+v", e.Name, e.State, want, e)
				}
				if want == "failed" && (!strings.Contains(e.LastError, "5 times") || e.Restarts != 4) {
					t.Errorf("failed engine: %+v, want 5 starts, 4 restarts, the reason", e)
				}
				if want == "failed" && (e.Cause != "out_of_memory" || !strings.HasSuffix(e.LastError, "lower --max-model-len or use a smaller model")) {
					t.Errorf("failed engine: %+v, want it diagnosed out of memory, with the fix", e)
				}
			}
			logs, _, err := runHearth(t, "", "logs", "sim/gpu0", "--addr", baseURL)
			if err != nil || !strings.Contains(logs, "CUDA out of memory") {
				t.Errorf("hearth logs sim/gpu0: %q, %v; want its last lines", logs, err)
			}
			// The console's card shows the state and the last lines.
			waitLive(t, baseURL, "overview", ">failed<", "CUDA out of memory", "lower --max-model-len or use a smaller model")
			out, _, err := runHearth(t, "", "engines", "--addr", baseURL)
			if err != nil || !strings.Contains(out, "failed") || !strings.Contains(out, "sim/gpu1") {
				t.Errorf("hearth engines: %v\n%s", err, out)
			}

			resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"qwen3-14b-fp8","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(tc.failing) == 1 {
				if resp.StatusCode != http.StatusOK || resp.Header.Get("x-hearth-worker") != "sim/gpu1" {
					t.Errorf("with one engine failed: %s from %q, want 200 from sim/gpu1: %s", resp.Status, resp.Header.Get("x-hearth-worker"), body)
				}
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				!strings.Contains(string(body), "sim/gpu0 failed") || !strings.Contains(string(body), "out of memory") && !strings.Contains(string(body), "exit status 1") {
				t.Errorf("with no engine left: %s, Retry-After %q: %s; want 503 saying why", resp.Status, resp.Header.Get("Retry-After"), body)
			}
		})
	}
}

// TestDaemonTakesItsEnginesWithIt runs hearth up as a real process with
// engines as its children: SIGTERM stops them within the stop timeout, and
// SIGKILL of the daemon leaves no engine behind either (the kernel kills
// them: PR_SET_PDEATHSIG).
func TestDaemonTakesItsEnginesWithIt(t *testing.T) {
	exe := hearthBinary(t)
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			daemon := exec.Command(exe, "up", "--sim", "2x4090", "--engine-runtime", "process", "--speedup", "50",
				"--listen", addr, "--data-dir", t.TempDir(), "--stop-timeout", "5s", "--layout", "per-gpu")
			daemon.Env = append(os.Environ(), asHearthEnv+"=1")
			stdout, err := daemon.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			// Read on failure while the daemon still writes to it.
			stderr := &syncBuffer{}
			daemon.Stderr = stderr
			if err := daemon.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			// The client settings are printed once the engines are ready.
			ready := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stdout)
				once := sync.OnceFunc(func() { close(ready) })
				for sc.Scan() {
					once()
				}
				exited <- daemon.Wait()
			}()
			select {
			case <-ready:
			case <-time.After(time.Minute): // bounds a hang
				daemon.Process.Kill()
				t.Fatalf("daemon not ready within a minute:\n%s", stderr.String())
			}
			baseURL := "http://" + addr
			var pids []int
			for _, e := range listEngines(t, baseURL) {
				pids = append(pids, e.PID)
			}
			if len(pids) != 2 || pids[0] <= 0 || pids[1] <= 0 {
				t.Fatalf("engine PIDs %v", pids)
			}
			if err := daemon.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(30 * time.Second): // the stop timeout is 5 s
				daemon.Process.Kill()
				t.Fatalf("daemon still running 30 s after %s", sig)
			}
			// The daemon has exited; its engines must follow at once.
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range pids {
				for processAlive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("engine %d still runs after the daemon got %s", pid, sig)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// asHearthEngine makes an engine of the process runtime this test binary
// playing hearth sim-engine, through the engine's own environment (a
// daemon.WithSpecHook), so that the test may run in parallel.
func asHearthEngine(s *hruntime.Spec) { s.Env = append(s.Env, asHearthEnv+"=1") }

// hearthBinary is the hearth binary a test runs as a child process: its
// daemon's engines (hearth sim-engine), or the daemon itself (hearth up).
// Without -race it is this test binary, which asHearthEnv in its
// environment (asHearthEngine for engines) makes hearth. Under -race it is
// hearth built without the detector, the build the Docker tests put in
// their images: a race found in a child process fails no test (go test
// counts this process's reports alone, and a child's end is a signal),
// while a race-built child costs about 3 s of CPU and 10 s of wall time to
// start on a busy 2-core machine, against 0.5 s and 2 s. A daemon under
// test in this process stays under the detector, and the simulated
// engine's own code is raced in runtime/sim's tests.
func hearthBinary(t *testing.T) string {
	t.Helper()
	if raceDetector {
		return dockertest.StaticHearth(t)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("skipping: no path to this test binary to run engines with: %v", err)
	}
	return exe
}

// Shared with the other tests of a running daemon.
var (
	listEngines = daemontest.ListEngines
	waitEngine  = daemontest.WaitEngine
)
