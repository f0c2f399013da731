// Package dockertest gives tests a client of the local Docker Engine and the
// simulated engines' images, built FROM scratch around a static hearth
// binary compiled for the test run (or around the default, dynamically
// linked cgo build: CgoHearth). Without a Docker Engine a test is
// skipped, saying why, except in CI (CI set), where it fails: CI's machine
// has one and the tests must run there.
package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// Client returns a client of the local Docker Engine, or skips the test
// when none answers.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker Engine answers, and CI must run the Docker tests: %v", err)
		}
		t.Skipf("skipped: no Docker Engine answers (%v)", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var (
	buildOnce   sync.Once
	staticPath  string
	buildErr    error
	imagesMu    sync.Mutex
	imagesBuilt = map[hruntime.Kind]string{}
)

// RemoveBuilds deletes the binaries StaticHearth and CgoHearth built in
// this test process. A package whose tests call either calls it from
// TestMain after m.Run, so no build is left in the temporary directory.
func RemoveBuilds() {
	for _, path := range []string{staticPath, cgoPath} {
		if path != "" {
			os.RemoveAll(filepath.Dir(path))
		}
	}
}

// StaticHearth builds the hearth binary without cgo, once per test process,
// and returns its path.
func StaticHearth(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hearth-static-")
		if err != nil {
			buildErr = err
			return
		}
		staticPath = filepath.Join(dir, "hearth")
		cmd := exec.Command("go", "build", "-o", staticPath, "github.com/hearth-llm/hearth/cmd/hearth")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("static hearth binary: %v", buildErr)
	}
	return staticPath
}

var (
	cgoOnce  sync.Once
	cgoPath  string
	cgoError error
)

// CgoHearth builds the hearth binary as `go build ./cmd/hearth` does by
// default, with cgo (dynamically linked against the C library), once per
// test process, and returns its path. Without a C compiler the test is
// skipped, saying why, except in CI, where it fails.
func CgoHearth(t testing.TB) string {
	t.Helper()
	cgoOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hearth-cgo-")
		if err != nil {
			cgoError = err
			return
		}
		cgoPath = filepath.Join(dir, "hearth")
		cmd := exec.Command("go", "build", "-o", cgoPath, "github.com/hearth-llm/hearth/cmd/hearth")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			cgoError = fmt.Errorf("go build with CGO_ENABLED=1: %v\n%s", err, out)
		}
	})
	if cgoError != nil {
		if _, err := exec.LookPath("gcc"); err != nil && os.Getenv("CI") == "" {
			t.Skipf("skipped: no C compiler for the cgo build (%v)", cgoError)
		}
		t.Fatalf("cgo hearth binary: %v", cgoError)
	}
	return cgoPath
}

// SimImage returns the simulated image of a flavour, building it when the
// Docker Engine lacks it. Its tag is the binary's hash, so a changed binary
// gets a new image and an unchanged one is built once.
func SimImage(t testing.TB, cli *client.Client, flavor hruntime.Kind) string {
	t.Helper()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if image, ok := imagesBuilt[flavor]; ok {
		return image
	}
	bin := StaticHearth(t)
	hash, err := docker.BinaryHash(bin)
	if err != nil {
		t.Fatal(err)
	}
	image := docker.SimImage(flavor, "test-"+hash[:12])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		var log strings.Builder
		if err := docker.BuildSimImage(ctx, cli, bin, flavor, image, &log); err != nil {
			t.Fatalf("building %s: %v\n%s", image, err, log.String())
		}
	}
	imagesBuilt[flavor] = image
	return image
}

// Node returns a node name of the test's own, and removes every container
// labelled with it when the test ends, whatever state it left them in.
func Node(t testing.TB, cli *client.Client) string {
	t.Helper()
	var b [4]byte
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())))
	copy(b[:], sum[:])
	node := testNodePrefix + hex.EncodeToString(b[:])
	sweepStale.Do(func() { removeStale(t, cli) })
	t.Cleanup(func() { RemoveNode(t, cli, node) })
	return node
}

// testNodePrefix starts the node name of every test's containers.
const testNodePrefix = "test-"

// staleAge is how long a test container must have stopped before another
// test run takes it for the leftover of a run that was killed (and so
// never ran its cleanup). Running containers may be another package's,
// tested at the same time, and are never touched.
const staleAge = 10 * time.Minute

var sweepStale sync.Once

// removeStale removes the stopped containers that killed test runs left.
func removeStale(t testing.TB, cli *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", docker.LabelNode).Add("status", "exited").Add("status", "created").Add("status", "dead"),
	})
	if err != nil {
		t.Logf("listing stale test containers: %v", err)
		return
	}
	for _, c := range list.Items {
		if !strings.HasPrefix(c.Labels[docker.LabelNode], testNodePrefix) || time.Since(time.Unix(c.Created, 0)) < staleAge {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Logf("removing stale test container %s: %v", c.ID, err)
		}
	}
}

// RemoveNode removes the containers of a node.
func RemoveNode(t testing.TB, cli *client.Client, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range Containers(t, cli, node) {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("removing container %s: %v", c.ID, err)
		}
	}
}

// Container is one container of a node as a test sees it.
type Container struct {
	ID, Name, Engine, State string
}

// Containers lists a node's containers, running or not.
func Containers(t testing.TB, cli *client.Client, node string) []Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", docker.LabelNode+"="+node),
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	out := make([]Container, 0, len(list.Items))
	for _, c := range list.Items {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Container{ID: c.ID, Name: name, Engine: c.Labels[docker.LabelEngine], State: string(c.State)})
	}
	return out
}

// SimSpec is the spec of a small simulated engine of kind on node's GPU 0,
// fast (speedup 50) and seeded.
func SimSpec(node string, kind hruntime.Kind) hruntime.Spec {
	return hruntime.Spec{
		Name: node + "/gpu0", Engine: kind, Model: "qwen3-8b", ModelPath: "Qwen/Qwen3-8B",
		GPU: hruntime.GPU{Index: 0, Kind: "rtx4090", Node: node}, Speedup: 50, Seed: 3,
	}
}

// SimLauncher launches kind's simulated image (SimImage) as node's
// engines, without a GPU or a pull, logging to the test.
func SimLauncher(t *testing.T, cli *client.Client, kind hruntime.Kind, node string) *docker.Launcher {
	t.Helper()
	return &docker.Launcher{
		Docker: cli, Node: node, Image: SimImage(t, cli, kind), NoGPU: true, NoPull: true,
		Logger: Logger(t),
	}
}

// LaunchReadyBound stops a launch that hangs: nothing here should come
// near it.
const LaunchReadyBound = time.Minute

// LaunchReady launches spec with l and waits until the engine is ready,
// failing the test, with the engine's logs, if it is not within
// LaunchReadyBound.
func LaunchReady(t *testing.T, l *docker.Launcher, spec hruntime.Spec) hruntime.Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LaunchReadyBound)
	defer cancel()
	start := time.Now()
	h, err := l.Launch(ctx, spec)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, strings.Join(h.Logs(), "\n"))
	}
	t.Logf("container %s: start to ready in %v", h.Identity().Container, time.Since(start).Round(time.Millisecond))
	return h
}

// Logger writes a launcher's log lines, at Info and above, to the test's
// log.
func Logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
