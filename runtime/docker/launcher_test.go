package docker_test

import (
	"context"
	"debug/elf"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// bound stops a test that hangs; nothing here should come near it.
const bound = dockertest.LaunchReadyBound

var (
	simSpec     = dockertest.SimSpec
	newLauncher = dockertest.SimLauncher
	launchReady = dockertest.LaunchReady
	testLogger  = dockertest.Logger
)

func inspect(t *testing.T, cli *client.Client, id string) client.ContainerInspectResult {
	t.Helper()
	got, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return got
}

func TestLaunchServesOnLoopbackAndStops(t *testing.T) {
	cli := dockertest.Client(t)
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(kind), func(t *testing.T) {
			node := dockertest.Node(t, cli)
			l := newLauncher(t, cli, kind, node)
			h := launchReady(t, l, simSpec(node, kind))

			got := inspect(t, cli, h.Identity().Container).Container
			if got.Config.Labels[docker.LabelEngine] != node+"/gpu0" || got.Config.Labels[docker.LabelConfig] == "" {
				t.Errorf("labels = %v", got.Config.Labels)
			}
			for port, bindings := range got.HostConfig.PortBindings {
				for _, b := range bindings {
					if b.HostIP.String() != "127.0.0.1" {
						t.Errorf("port %v published on %v, not loopback only", port, b.HostIP)
					}
				}
			}
			if got.HostConfig.RestartPolicy.Name != "no" || string(got.HostConfig.IpcMode) != "host" {
				t.Errorf("host config: restart %q, ipc %q", got.HostConfig.RestartPolicy.Name, got.HostConfig.IpcMode)
			}
			chat(t, h.Endpoints().BaseURL, "qwen3-8b")

			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := h.Stop(ctx); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if err := h.Wait(); err != nil {
				t.Errorf("a stopped engine exits cleanly, got %v", err)
			}
			if left := dockertest.Containers(t, cli, node); len(left) != 0 {
				t.Errorf("containers left after stop: %+v", left)
			}
		})
	}
}

func chat(t *testing.T, baseURL, model string) {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}],"max_tokens":4}`
	resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"choices"`) {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
}

func TestAdoptsRunningContainerWithSameConfig(t *testing.T) {
	cli := dockertest.Client(t)
	node := dockertest.Node(t, cli)
	spec := simSpec(node, hruntime.KindVLLM)
	first := launchReady(t, newLauncher(t, cli, hruntime.KindVLLM, node), spec)
	id := first.Identity().Container
	first.(hruntime.Detacher).Detach() // as a daemon stopping with --keep-engines
	if err := first.Wait(); !errors.Is(err, docker.ErrDetached) {
		t.Fatalf("wait after detach = %v", err)
	}
	if !inspect(t, cli, id).Container.State.Running {
		t.Fatal("detaching stopped the container")
	}

	// A new daemon with the same plan takes the container over.
	again := launchReady(t, newLauncher(t, cli, hruntime.KindVLLM, node), spec)
	if again.Identity().Container != id {
		t.Fatalf("adopted %s, want the running %s", again.Identity().Container, id)
	}
	chat(t, again.Endpoints().BaseURL, "qwen3-8b")
	again.(hruntime.Detacher).Detach()

	// A changed plan replaces it.
	spec.MaxModelLen = 8192
	changed := launchReady(t, newLauncher(t, cli, hruntime.KindVLLM, node), spec)
	if changed.Identity().Container == id {
		t.Fatal("a container of another configuration was adopted")
	}
	if left := dockertest.Containers(t, cli, node); len(left) != 1 {
		t.Errorf("containers = %+v, want only the new one", left)
	}
}

func TestRemoveStale(t *testing.T) {
	cli := dockertest.Client(t)
	node := dockertest.Node(t, cli)
	l := newLauncher(t, cli, hruntime.KindVLLM, node)
	keep, gone := simSpec(node, hruntime.KindVLLM), simSpec(node, hruntime.KindVLLM)
	gone.Name = node + "/gpu9"
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for _, s := range []hruntime.Spec{keep, gone} {
		h, err := l.Launch(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		defer h.(hruntime.Detacher).Detach()
	}
	if err := l.RemoveStale(ctx, []hruntime.Spec{keep}); err != nil {
		t.Fatal(err)
	}
	left := dockertest.Containers(t, cli, node)
	if len(left) != 1 || left[0].Engine != keep.Name {
		t.Errorf("containers after RemoveStale = %+v, want only %s", left, keep.Name)
	}
}

func TestMissingImageIsExplained(t *testing.T) {
	cli := dockertest.Client(t)
	node := dockertest.Node(t, cli)
	l := &docker.Launcher{Docker: cli, Node: node, Image: "hearth-test/no-such-image:1", NoGPU: true, Logger: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err := l.Launch(ctx, simSpec(node, hruntime.KindVLLM))
	var pe *docker.PullError
	if !errors.As(err, &pe) {
		t.Fatalf("launch = %v, want a pull error", err)
	}
	// This machine reaches no registry; one that does finds no such image.
	if pe.Cause != docker.PullNoNetwork && pe.Cause != docker.PullNotFound && pe.Cause != docker.PullAuth {
		t.Errorf("cause = %s: %v", pe.Cause, err)
	}
	t.Logf("told: %v", err)
	if left := dockertest.Containers(t, cli, node); len(left) != 0 {
		t.Errorf("containers left: %+v", left)
	}
}

func TestPortTakenBeforeDockerBindsIt(t *testing.T) {
	cli := dockertest.Client(t)
	node := dockertest.Node(t, cli)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	l := newLauncher(t, cli, hruntime.KindVLLM, node)
	picks := 0
	docker.SetPortPicker(l, func() (hruntime.Ports, error) {
		picks++
		p, err := hruntime.FreePorts("127.0.0.1")
		if picks == 1 {
			p.HTTP = taken.Addr().(*net.TCPAddr).Port // another program got there first
		}
		return p, err
	})
	h := launchReady(t, l, simSpec(node, hruntime.KindVLLM))
	defer h.(hruntime.Detacher).Detach()
	if picks != 2 {
		t.Errorf("picked ports %d times, want a second pick after the conflict", picks)
	}
	if strings.HasSuffix(h.Endpoints().BaseURL, ":"+strings.Split(taken.Addr().String(), ":")[1]) {
		t.Errorf("engine serves on the taken port: %s", h.Endpoints().BaseURL)
	}
	if left := dockertest.Containers(t, cli, node); len(left) != 1 {
		t.Errorf("containers = %+v, want one (the failed start removed)", left)
	}
}

func TestNoNvidiaRuntime(t *testing.T) {
	cli := dockertest.Client(t)
	info, err := cli.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Info.Runtimes["nvidia"]; ok {
		t.Skip("skipped: this Docker Engine has the NVIDIA runtime, so a GPU request does not fail")
	}
	node := dockertest.Node(t, cli)
	l := newLauncher(t, cli, hruntime.KindVLLM, node)
	l.NoGPU = false
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err = l.Launch(ctx, simSpec(node, hruntime.KindVLLM))
	if err == nil || !strings.Contains(err.Error(), "nvidia") {
		t.Fatalf("launch = %v, want Docker's refusal of the GPU request", err)
	}
	t.Logf("told: %v", err)
	if left := dockertest.Containers(t, cli, node); len(left) != 0 {
		t.Errorf("containers left: %+v", left)
	}
}

func TestEngineThatDiesAtStart(t *testing.T) {
	cli := dockertest.Client(t)
	node := dockertest.Node(t, cli)
	spec := simSpec(node, hruntime.KindVLLM)
	spec.ExtraArgs = []string{"--simulate-failure", "oom"}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	h, err := newLauncher(t, cli, hruntime.KindVLLM, node).Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Ready(ctx); !errors.Is(err, hruntime.ErrExited) {
		t.Fatalf("ready = %v, want ErrExited", err)
	}
	if err := h.Wait(); err == nil || !strings.Contains(err.Error(), "exit status") {
		t.Errorf("wait = %v, want the exit status", err)
	}
	// The last lines, which a diagnosis reads, arrived before the exit.
	if logs := strings.Join(h.Logs(), "\n"); !strings.Contains(logs, "CUDA out of memory") {
		t.Errorf("log tail lacks the OOM line:\n%s", logs)
	}
}

// The default build of hearth links the C library; its image brings the
// loader and the libraries, and the engine in it serves as the static
// build's does.
func TestLaunchFromTheDefaultCgoBuild(t *testing.T) {
	cli := dockertest.Client(t)
	bin := dockertest.CgoHearth(t)
	if !dynamicallyLinked(t, bin) {
		t.Fatalf("%s: the cgo build is expected to be dynamically linked", bin)
	}
	hash, err := docker.BinaryHash(bin)
	if err != nil {
		t.Fatal(err)
	}
	image := docker.SimImage(hruntime.KindVLLM, "test-cgo-"+hash[:12])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log strings.Builder
	if err := docker.BuildSimImage(ctx, cli, bin, hruntime.KindVLLM, image, &log); err != nil {
		t.Fatalf("building %s from the cgo build: %v\n%s", image, err, log.String())
	}
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	node := dockertest.Node(t, cli)
	l := &docker.Launcher{Docker: cli, Node: node, Image: image, NoGPU: true, NoPull: true, Logger: testLogger(t)}
	h := launchReady(t, l, simSpec(node, hruntime.KindVLLM))
	chat(t, h.Endpoints().BaseURL, "qwen3-8b")
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func dynamicallyLinked(t *testing.T, path string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
