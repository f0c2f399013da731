//go:build linux

package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

func shellSpec(script string) hruntime.Spec {
	return hruntime.Spec{
		Name: "gpu0", Engine: hruntime.KindVLLM, Model: "m",
		GPU:     hruntime.GPU{Index: 1, UUID: "GPU-0f1e2d3c"},
		Command: []string{"/bin/sh", "-c", script},
		Env:     []string{"HF_TOKEN=hf_test"},
	}
}

// waitExit bounds a wait that normally takes milliseconds.
func waitExit(t *testing.T, h hruntime.Handle) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("engine process still running after a minute")
		return nil
	}
}

func TestLaunchGivesTheEngineItsGPUAndEnvironment(t *testing.T) {
	l := &Launcher{Env: []string{"PATH=" + os.Getenv("PATH")}}
	h, err := l.Launch(t.Context(), shellSpec(`echo "gpu=$CUDA_VISIBLE_DEVICES seed=$PYTHONHASHSEED token=$HF_TOKEN port=$HEARTH_ENGINE_PORT"; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	err = waitExit(t, h)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Wait: %v, want exit status 3", err)
	}
	logs := strings.Join(h.Logs(), "\n")
	port := strings.TrimPrefix(h.Endpoints().BaseURL, "http://127.0.0.1:")
	want := "gpu=GPU-0f1e2d3c seed=0 token=hf_test port=" + port
	if logs != want {
		t.Errorf("engine saw %q, want %q", logs, want)
	}
	if err := h.Ready(t.Context()); !errors.Is(err, hruntime.ErrExited) {
		t.Errorf("Ready of an exited engine: %v, want ErrExited", err)
	}
}

// TestStopKillsAnEngineThatIgnoresSIGTERM, and its children: the process
// group goes.
func TestStopKillsAnEngineThatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child")
	l := &Launcher{}
	h, err := l.Launch(t.Context(), shellSpec(`trap '' TERM; sleep 300 & echo $! > `+childPID+`; echo started; wait`))
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, h, "started")
	b, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = h.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop: %v, want it to say the engine was killed", err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("killed after %v, before the grace period ended", took)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the engine's child %d survived the stop", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStopEndsAnEngineGracefully(t *testing.T) {
	l := &Launcher{}
	h, err := l.Launch(t.Context(), shellSpec(`trap 'echo bye; exit 0' TERM; echo started; while :; do sleep 0.05; done`))
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, h, "started")
	if err := h.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if logs := strings.Join(h.Logs(), "\n"); !strings.Contains(logs, "bye") {
		t.Errorf("the engine did not get SIGTERM first: %q", logs)
	}
}

func TestLaunchFailsCleanly(t *testing.T) {
	l := &Launcher{}
	if _, err := l.Launch(t.Context(), shellSpec("true")); err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
	spec := shellSpec("")
	spec.Command = []string{filepath.Join(t.TempDir(), "no-such-engine")}
	if _, err := l.Launch(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "no-such-engine") {
		t.Errorf("a missing program: %v, want an error naming it", err)
	}
	sim := hruntime.Spec{Name: "gpu0", Engine: hruntime.KindVLLM, Simulated: true, Model: "m"}
	if _, err := l.Launch(t.Context(), sim); err == nil || !strings.Contains(err.Error(), "hearth binary") {
		t.Errorf("a simulated engine without the hearth binary: %v", err)
	}
}

// waitLog waits for the engine to print a line containing s; the bound only
// stops a hang.
func waitLog(t *testing.T, h hruntime.Handle, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(strings.Join(h.Logs(), "\n"), s) {
		if time.Now().After(deadline) {
			t.Fatalf("engine never printed %q: %q", s, h.Logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// TestLogsCanBeFollowed: a reader waiting on the engine's log wakes when
// the engine prints.
func TestLogsCanBeFollowed(t *testing.T) {
	dir := t.TempDir()
	goOn := filepath.Join(dir, "go-on")
	l := &Launcher{}
	h, err := l.Launch(t.Context(), shellSpec(`echo first; while [ ! -e `+goOn+` ]; do sleep 0.01; done; echo second`))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := h.(hruntime.LogFollower)
	if !ok {
		t.Fatal("the process handle cannot be followed")
	}
	waitLog(t, h, "first")
	lines, next, more := f.LogsSince(0)
	if strings.Join(lines, "\n") != "first" || next != 1 {
		t.Fatalf("LogsSince(0): %q, next %d", lines, next)
	}
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-more:
	case <-time.After(time.Minute):
		t.Fatal("no wake-up after the engine printed")
	}
	if lines, _, _ := f.LogsSince(next); strings.Join(lines, "\n") != "second" {
		t.Fatalf("LogsSince(%d): %q, want the second line", next, lines)
	}
	waitExit(t, h)
}
