//go:build unix

package simcli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// asEngineEnv, set in the environment of this test binary, makes it the
// engine program its name (argv[0]) says, as the hearth binary is in the
// simulated images.
const asEngineEnv = "HEARTH_TEST_AS_ENGINE"

func TestMain(m *testing.M) {
	if os.Getenv(asEngineEnv) == "1" {
		prog, ok := Program(os.Args[0])
		if !ok {
			fmt.Fprintln(os.Stderr, "not an engine program:", os.Args[0])
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := RunProgram(ctx, Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, prog, os.Args[1:])
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// engineHangGuard bounds every wait on a child engine: it only stops a hung
// test.
const engineHangGuard = 60 * time.Second

// engineBinary links this test binary as name (vllm, python3) in a
// temporary directory: run with asEngineEnv, it is that engine, simulated.
func engineBinary(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// engineEnv is the environment of a simulated engine child: a fast small
// engine on a host with 64 GiB available, whatever this machine has, so
// that SGLang's host-memory guard weighs the same figure everywhere.
func engineEnv(extra ...string) []string {
	return append(os.Environ(), append([]string{asEngineEnv + "=1", hruntime.EnvSimSpeedup + "=1000",
		hruntime.EnvSimNumGPUBlocks + "=512", hruntime.EnvSimMemAvailableGiB + "=64"}, extra...)...)
}

// engineProc is a simulated engine running as a child process.
type engineProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	mu     sync.Mutex
	output []string
	exited chan struct{}
	err    error // Wait's, set before exited closes
}

func startEngineProc(t *testing.T, bin string, args []string, env ...string) *engineProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = engineEnv(env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &engineProc{t: t, cmd: cmd, lines: make(chan string, 8192), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.output = append(p.output, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("engine output:\n%s", p.text())
		}
	})
	return p
}

func (p *engineProc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.output, "\n")
}

// waitLine waits for an output line containing substr.
func (p *engineProc) waitLine(substr string) {
	p.t.Helper()
	deadline := time.After(engineHangGuard)
	for {
		select {
		case line := <-p.lines:
			if strings.Contains(line, substr) {
				return
			}
		case <-p.exited:
			p.t.Fatalf("the engine exited (%v) before printing %q", p.err, substr)
		case <-deadline:
			p.t.Fatalf("no %q in the engine's output", substr)
		}
	}
}

// stop sends SIGTERM and returns the exit status.
func (p *engineProc) stop() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(engineHangGuard):
		p.t.Fatal("the engine ignored SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

// freePorts returns n loopback ports nothing listens on right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// firstKVBatch subscribes to an engine's KV events and sends chats until a
// batch arrives: a ZMQ subscription takes effect some time after the dial,
// and only batches published after that reach it.
func firstKVBatch(t *testing.T, endpoint, topic, baseURL, model string) kvevents.Batch {
	t.Helper()
	var b kvevents.Batch
	var dec kvevents.Decoder
	if err := dec.Decode(firstKVPayload(t, endpoint, topic, baseURL, model), &b); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return b
}

// firstKVPayload is firstKVBatch's payload as it came, undecoded.
func firstKVPayload(t *testing.T, endpoint, topic, baseURL, model string) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan zmq4.Msg, 16)
	go func() {
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			msgs <- msg
		}
	}()
	deadline := time.After(engineHangGuard)
	for i := 0; ; i++ {
		chat(t, baseURL, model, fmt.Sprintf("Request %d: explain how the radix cache pages prompts.", i))
		select {
		case msg := <-msgs:
			if len(msg.Frames) != 3 || string(msg.Frames[0]) != topic {
				t.Fatalf("KV event message frames %q", msg.Frames)
			}
			return msg.Frames[2]
		case <-time.After(200 * time.Millisecond): // not subscribed yet: publish more
		case <-deadline:
			t.Fatal("no KV event batch reached the subscriber")
		}
	}
}

// chat sends one chat completion and checks it was answered.
func chat(t *testing.T, baseURL, model, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":%q}]}`, model, text)
	resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		t.Fatalf("chat: %s, %v", resp.Status, err)
	}
}

// TestEngineImagesEntrypoints runs this binary as the vLLM and SGLang
// images do, with the command lines Hearth's Docker runtime gives them, and
// uses each as Hearth would: readiness, a chat, KV events, SIGTERM.
func TestEngineImagesEntrypoints(t *testing.T) {
	tests := []struct {
		kind    hruntime.Kind
		program string
		ready   string
	}{
		{hruntime.KindVLLM, "vllm", "Application startup complete."},
		{hruntime.KindSGLang, "python3", "The server is fired up and ready to roll!"},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			p := freePorts(t, 3)
			ports := hruntime.Ports{Host: "127.0.0.1", HTTP: p[0], KVEvents: p[1], Replay: p[2]}
			spec := hruntime.Spec{Name: "gpu0", Engine: tc.kind, Model: "qwen3-8b", ModelPath: "Qwen/Qwen3-8B",
				MaxModelLen: 4096}
			argv := hruntime.EngineArgs(spec, ports, "")
			if argv[0] != tc.program {
				t.Fatalf("the runtime runs %q", argv)
			}
			proc := startEngineProc(t, engineBinary(t, tc.program), argv[1:])
			began := time.Now()
			proc.waitLine(tc.ready)
			ep := ports.Endpoints(tc.kind)
			ctx, cancel := context.WithTimeout(context.Background(), engineHangGuard)
			defer cancel()
			if err := hruntime.WaitReady(ctx, http.DefaultClient, ep.BaseURL, "qwen3-8b", proc.exited); err != nil {
				t.Fatalf("WaitReady: %v", err)
			}
			t.Logf("ready %v after the exec", time.Since(began))

			b := firstKVBatch(t, ep.KVEvents, ep.Topic, ep.BaseURL, "qwen3-8b")
			var stored *kvevents.Event
			for i := range b.Events {
				if b.Events[i].Kind == kvevents.BlockStored && !b.Events[i].HasParent {
					stored = &b.Events[i]
					break
				}
			}
			if stored == nil {
				t.Fatalf("first batch has no first-block BlockStored: %+v", b)
			}
			if tc.kind == hruntime.KindSGLang {
				want := sim.SGLangBlockHashes(stored.TokenIDs, 16)
				if len(stored.BlockHashes) != 1 || len(want) != 1 || stored.BlockHashes[0] != want[0] {
					t.Errorf("SGLang BlockStored hashes %x, SGLang's hash of its tokens %x", stored.BlockHashes, want)
				}
			}
			if tc.kind == hruntime.KindSGLang {
				if code, body := httpGet(t, ep.BaseURL+"/get_server_info"); code != http.StatusOK ||
					!strings.Contains(body, `"max_total_num_tokens":8192`) {
					t.Errorf("/get_server_info: %d %s", code, body)
				}
				if code, _ := httpGet(t, ep.BaseURL+"/health_generate"); code != http.StatusOK {
					t.Errorf("/health_generate: %d", code)
				}
			}
			if code := proc.stop(); code != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0", code)
			}
			if !strings.Contains(proc.text(), "Application shutdown complete.") {
				t.Error("no shutdown lines after SIGTERM")
			}
		})
	}
}

// TestEngineImagesPlayTheRelease: a simulated image told a release (the
// environment the Docker runtime writes for a spec whose --image names
// it) publishes that release's KV-event form on the wire: vLLM v0.20.0 and
// SGLang v0.5.19 positional arrays tagged by class name, the pinned v0.33.0
// and v0.5.23 maps tagged "type".
func TestEngineImagesPlayTheRelease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind    hruntime.Kind
		version string
		maps    bool
	}{
		{hruntime.KindVLLM, "0.20.0", false},
		{hruntime.KindVLLM, "", true},
		{hruntime.KindSGLang, "0.5.19", false},
		{hruntime.KindSGLang, "0.5.23", true},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind)+"@"+tc.version, func(t *testing.T) {
			t.Parallel()
			p := freePorts(t, 3)
			ports := hruntime.Ports{Host: "127.0.0.1", HTTP: p[0], KVEvents: p[1], Replay: p[2]}
			spec := hruntime.Spec{Name: "gpu0", Engine: tc.kind, Model: "qwen3-8b", ModelPath: "Qwen/Qwen3-8B",
				MaxModelLen: 4096, EngineVersion: tc.version}
			argv := hruntime.EngineArgs(spec, ports, "")
			proc := startEngineProc(t, engineBinary(t, argv[0]), argv[1:], hruntime.SimSettingsOf(spec).Env()...)
			ep := ports.Endpoints(tc.kind)
			ctx, cancel := context.WithTimeout(context.Background(), engineHangGuard)
			defer cancel()
			if err := hruntime.WaitReady(ctx, http.DefaultClient, ep.BaseURL, "qwen3-8b", proc.exited); err != nil {
				t.Fatalf("WaitReady: %v", err)
			}
			payload := firstKVPayload(t, ep.KVEvents, ep.Topic, ep.BaseURL, "qwen3-8b")
			var batch []msgpack.RawMessage
			if err := msgpack.Unmarshal(payload, &batch); err != nil || len(batch) < 2 {
				t.Fatalf("batch %x: %v", payload, err)
			}
			var events []any
			if err := msgpack.Unmarshal(batch[1], &events); err != nil || len(events) == 0 {
				t.Fatalf("events %x: %v", []byte(batch[1]), err)
			}
			switch ev := events[0].(type) {
			case map[string]any:
				if !tc.maps || ev["type"] == nil {
					t.Errorf("release %q published a map event %v", tc.version, ev)
				}
			case []any:
				if name, _ := ev[0].(string); tc.maps || name == "" {
					t.Errorf("release %q published a positional event %v", tc.version, ev)
				}
			default:
				t.Errorf("event %T %v", ev, ev)
			}
			// The release it reports: vLLM's /version, SGLang's /server_info.
			want, path := tc.version, "/version"
			if want == "" {
				want = tc.kind.Descriptor().Pinned().Version
			}
			if tc.kind == hruntime.KindSGLang {
				path = "/server_info"
			}
			if code, body := httpGet(t, ep.BaseURL+path); code != http.StatusOK || !strings.Contains(body, `"version":"`+want+`"`) {
				t.Errorf("%s: %d %s, want version %s", path, code, body, want)
			}
			proc.stop()
		})
	}
}

// TestSGLangFileBackendPages: the simulated SGLang, run with the command
// line and environment Hearth gives SGLang for the node store, writes its
// HiCache file pages as HiCacheFile does: "<64 hex><suffix>.bin" at the
// directory's root, the suffix "_<served model>_<tp rank>_<tp size>",
// renamed from temp files that do not stay behind.
func TestSGLangFileBackendPages(t *testing.T) {
	dir := t.TempDir()
	p := freePorts(t, 3)
	ports := hruntime.Ports{Host: "127.0.0.1", HTTP: p[0], KVEvents: p[1], Replay: p[2]}
	spec := hruntime.Spec{Name: "gpu0", Engine: hruntime.KindSGLang, Model: "qwen3-8b", ModelPath: "Qwen/Qwen3-8B",
		MaxModelLen: 4096, KVOffloadingGiB: 1, KVStoreDir: dir}
	argv := hruntime.EngineArgs(spec, ports, "")
	proc := startEngineProc(t, engineBinary(t, argv[0]), argv[1:], hruntime.EngineEnv(spec)...)
	ctx, cancel := context.WithTimeout(context.Background(), engineHangGuard)
	defer cancel()
	base := ports.Endpoints(hruntime.KindSGLang).BaseURL
	if err := hruntime.WaitReady(ctx, http.DefaultClient, base, "qwen3-8b", proc.exited); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	page := regexp.MustCompile(`^[0-9a-f]{64}_qwen3-8b_0_1\.bin$`)
	var names []string
	for ctx.Err() == nil {
		chat(t, base, "qwen3-8b", "Explain, in a few sentences, how a radix cache pages a long prompt into blocks.")
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ".tmp") }) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(names) == 0 {
		t.Fatal("no page files were written")
	}
	for _, n := range names {
		if !page.MatchString(n) {
			t.Errorf("%q is not a HiCacheFile page name", n)
		}
	}
	if code := proc.stop(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEngineEntrypointsFail: the exit statuses and messages of command
// lines and start-ups that go wrong.
func TestEngineEntrypointsFail(t *testing.T) {
	tests := []struct {
		name    string
		program string
		args    []string
		code    int
		output  string
	}{
		{"vllm oom", "vllm", []string{"serve", "Qwen/Qwen3-8B", "--port", "0", "--simulate-failure", "oom"}, 1,
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"},
		{"sglang oom", "python3", []string{"-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", "0",
			"--simulate-failure", "oom"}, 1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"},
		// The 64 GiB engineEnv states cannot hold 100,000 GB: SGLang's guard refuses it.
		{"sglang host pool over host memory", "python3", []string{"-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", "0",
			"--enable-hierarchical-cache", "--hicache-size", "100000"}, 1, "ValueError: Not enough host memory available. Requesting 100000.00 GB"},
		{"sglang exit", "sglang", []string{"serve", "Qwen/Qwen3-8B", "--port", "0", "--simulate-failure", "exit"}, 1,
			"Received sigquit from a child process."},
		{"vllm unknown flag", "vllm", []string{"serve", "Qwen/Qwen3-8B", "--frobnicate"}, 2,
			"vllm serve: error: unrecognized arguments: --frobnicate"},
		{"sglang unknown flag", "python3", []string{"-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--frobnicate"}, 2,
			"launch_server.py: error: unrecognized arguments: --frobnicate"},
		{"vllm unknown model", "vllm", []string{"serve", "meta-llama/Llama-2-7b-chat-hf"}, 1,
			"is not a local folder and is not a valid model identifier"},
		{"sglang unknown model", "python3", []string{"-m", "sglang.launch_server", "--model-path", "nobody/nothing"}, 1,
			"is not a local folder and is not a valid model identifier"},
		{"python3 without the module", "python3", []string{"-m", "vllm.entrypoints.openai.api_server"}, 1,
			"No module named vllm.entrypoints.openai.api_server"},
		{"vllm without serve", "vllm", []string{"bench"}, 2, "invalid choice: 'bench'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(engineBinary(t, tc.program), tc.args...)
			cmd.Env = engineEnv()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
				t.Errorf("exit %v, want status %d", err, tc.code)
			}
			if !strings.Contains(string(out), tc.output) {
				t.Errorf("output lacks %q:\n%s", tc.output, out)
			}
		})
	}
}

// TestSGLangHostMemoryFromTheEnvironment: the simulated SGLang weighs its
// HiCache host pool against the host memory the environment states
// (runtime.EnvSimMemAvailableGiB), not the machine's, so that what it
// refuses does not depend on the machine the test runs on: 12 GiB less
// SGLang's 10 GiB reserve cannot hold a 4 GB pool, 1 TiB holds 100 GB.
func TestSGLangHostMemoryFromTheEnvironment(t *testing.T) {
	sglang := func(gb string) []string {
		return []string{"-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", "0",
			"--enable-hierarchical-cache", "--hicache-size", gb}
	}
	t.Run("refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), engineHangGuard)
		defer cancel()
		// An engine that serves instead of refusing is killed at the guard.
		cmd := exec.CommandContext(ctx, engineBinary(t, "python3"), sglang("4")...)
		cmd.Env = engineEnv(hruntime.EnvSimMemAvailableGiB + "=12")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		want := "ValueError: Not enough host memory available. Requesting 4.00 GB but only have 2.15 GB free."
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Fatalf("exit %v, want status 1 and %q; output:\n%s", err, want, out)
		}
	})
	t.Run("accepted", func(t *testing.T) {
		p := startEngineProc(t, engineBinary(t, "python3"), sglang("100"), hruntime.EnvSimMemAvailableGiB+"=1024")
		p.waitLine("The server is fired up and ready to roll!")
		if status := p.stop(); status != 0 {
			t.Fatalf("exit status %d after SIGTERM", status)
		}
	})
}

// TestEngineLoadsTheModelsTokenizerFromTheCache starts a simulated vLLM for
// a model whose tokenizer is not built in: without its files in the
// Hugging Face cache the environment names, it fails as the real engine
// fails on a missing file; with them it serves.
func TestEngineLoadsTheModelsTokenizerFromTheCache(t *testing.T) {
	const repo = "meta-llama/Llama-3.1-8B-Instruct"
	empty := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), engineHangGuard)
	defer cancel()
	// An engine that serves instead of failing is killed at the guard.
	cmd := exec.CommandContext(ctx, engineBinary(t, "vllm"), "serve", repo, "--port", "0")
	cmd.Env = engineEnv("HF_HUB_CACHE=" + empty)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "does not hold "+repo) {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}

	hub := t.TempDir()
	snap := filepath.Join(hub, "models--meta-llama--Llama-3.1-8B-Instruct", "snapshots", "abc")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	qwen3, err := os.ReadFile(filepath.Join("..", "..", "..", "tokenizer", "models", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(qwen3))
	if err != nil {
		t.Fatal(err)
	}
	tokJSON, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "tokenizer.json"), tokJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startEngineProc(t, engineBinary(t, "vllm"), []string{"serve", repo, "--port", "0"}, "HF_HUB_CACHE="+hub)
	p.waitLine("Application startup complete.")
	if status := p.stop(); status != 0 {
		t.Fatalf("exit status %d after SIGTERM", status)
	}
}
