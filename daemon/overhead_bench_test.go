//go:build linux

package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// BenchmarkGatewayOverhead measures what the gateway adds on top of the
// engines it fronts, against nginx as a plain reverse proxy in the same run:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./daemon/
//
// Two simulated engines serve qwen3-8b on a modelled RTX 4090: a fast one
// (speedup 1e6, so that its modelled GPU time is negligible and only its
// HTTP work is left) and a paced one (speedup 1: tokens come at the rate
// the modelled card would give them). The clients and the engines run in
// this process. Each engine is reached four ways: directly; through nginx
// (proxy_buffering off, HTTP/1.1 keep-alive upstream); through the Go relay
// (runGoRelay: a plain reverse proxy on the gateway's server library, with
// none of its work, which shows what Go and fiber cost here); and through a
// Hearth gateway, wired as hearth up wires it (the real router following
// both engines' KV events, the real Qwen3 tokenizer, a key store;
// background sessions are steered to the paced engine and the rest to the
// fast one, see steeringRouter). Each proxy runs in a process of its own.
// Every path gets the same requests in the same order, and the paths take
// turns in rounds (the order rotating) so that a burst of load from
// elsewhere on the machine lands on all of them.
//
// Time to first token with N streams open: N−1 background streams run
// through the path to the paced engine, each asking for a 128-token answer
// and asking again when it ends, and one probe stream sends short streamed
// chat requests to the fast engine, one after another. TTFT is from sending
// a probe to reading its first chunk with content. The time a proxy adds is
// the shift of the probes' distribution over the direct path's,
// p50(proxy) − p50(direct) and p99(proxy) − p99(direct): requests of two
// paths are not paired, so this is a difference of distributions, not a
// quantile of per-request differences. The ratios divide Hearth's shift by
// nginx's and by the Go relay's. "proxy CPU ms/s" is the proxy process's
// CPU time per second of probing.
//
// Relay throughput: N streams send streamed requests to the fast engine
// back to back, which saturates the machine. Chunks/s is what the clients
// received end to end, with clients, engines and proxy sharing the two
// cores, so it is a floor of what the proxy alone could relay. The proxy's
// CPU time per chunk comes from /proc for both proxies; "capacity" is the
// machine's cores divided by it: the chunks per second the proxy could
// relay if it had every core.
//
// Memory per open stream: M streams to the paced engine are held open
// while the client holds them mid-stream (each has its first content
// chunk). For each proxy, the growth of its resident memory divided by M;
// for the Go proxies also the growth of their live heap and goroutine
// stacks after a collection (their resident size says little: Go keeps
// freed memory and returns it on its own schedule). The first column is the same for this
// process: the clients' and engines' share, equal on every path.
//
// HEARTH_BENCH_GATEWAY_PROFILE=file writes the gateway process's CPU
// profile. Whatever b.N is the work is done once; -benchtime 1x says so.
func BenchmarkGatewayOverhead(b *testing.B) {
	nginxBin := findNginx()
	if nginxBin == "" {
		b.Skip("nginx is not installed (the floor this benchmark compares against): apt-get install -y nginx")
	}
	b.ReportAllocs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tok, err := tokenizer.Qwen3()
	if err != nil {
		b.Fatal(err)
	}

	st := startOverheadStack(ctx, b, tok)
	ngx, err := startNginx(ctx, nginxBin, st.fastURL, st.pacedURL)
	if err != nil {
		b.Fatal(err)
	}
	defer ngx.stop()
	relay, err := startGatewayProcess(benchGatewaySpec{Relay: []string{st.fastURL, st.pacedURL}})
	if err != nil {
		b.Fatal(err)
	}
	defer relay.stop()

	paths := []overheadPath{
		{name: "direct", fast: st.fastURL, paced: st.pacedURL},
		{name: "nginx", fast: ngx.url[0], paced: ngx.url[1], cpu: ngx.cpu, rss: ngx.rss},
		{name: "go-relay", fast: relay.urls[0], paced: relay.urls[1], cpu: relay.cpu, rss: relay.rss, memory: relay.memory},
		{name: "hearth", fast: st.gateway.urls[0], paced: st.gateway.urls[0], cpu: st.gateway.cpu, rss: st.gateway.rss,
			memory: st.gateway.memory},
	}
	for i := range paths {
		paths[i].client = newBenchClient()
		defer paths[i].client.CloseIdleConnections()
	}
	// Warm every path: connections, the tokenizer's caches, the router's
	// first decisions.
	for _, p := range paths {
		if _, err := throughputCell(ctx, p, 256, 1, 1_000_000); err != nil {
			b.Fatalf("warm-up %s: %v", p.name, err)
		}
	}

	b.ResetTimer()
	ttft := make(map[string]map[int]*ttftResult) // path → streams → result
	tput := make(map[string]map[int]*throughputResult)
	for _, p := range paths {
		ttft[p.name] = make(map[int]*ttftResult)
		tput[p.name] = make(map[int]*throughputResult)
	}
	for _, lvl := range overheadTTFTLevels {
		for round := range lvl.rounds {
			for i := range paths {
				p := paths[(i+round)%len(paths)]
				per := lvl.probes / lvl.rounds
				r, err := ttftCell(ctx, p, lvl.streams-1, per, round*per, st.pacedIdle)
				if err != nil {
					b.Fatalf("time to first token, %s, %d streams: %v", p.name, lvl.streams, err)
				}
				r.merge(ttft[p.name][lvl.streams])
				ttft[p.name][lvl.streams] = r
			}
		}
	}
	for _, lvl := range overheadThroughputLevels {
		for round := range overheadRounds {
			for i := range paths {
				p := paths[(i+round)%len(paths)]
				per := lvl.requestsPerStream / overheadRounds
				r, err := throughputCell(ctx, p, lvl.streams, per, round*per)
				if err != nil {
					b.Fatalf("throughput, %s, %d streams: %v", p.name, lvl.streams, err)
				}
				r.merge(tput[p.name][lvl.streams])
				tput[p.name][lvl.streams] = r
			}
		}
	}

	mem := make(map[string]memResult)
	prompts, err := longAnswerPrompts(ctx, st.fastURL, overheadMemStreams)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range paths {
		r, err := holdStreams(ctx, p, prompts, st.pacedIdle)
		if err != nil {
			b.Fatalf("memory, %s: %v", p.name, err)
		}
		mem[p.name] = r
	}
	b.StopTimer()

	// Printed, not logged: the testing package cuts a benchmark's log to
	// ten lines.
	fmt.Print(overheadReport(b, ttft, tput, mem))
}

// Settings of the run; the totals keep it near a minute on two cores, with
// enough probes that the p99 is not a handful of them. Each cell's work is
// split evenly over the rounds.
var (
	// At one stream a round costs nothing to set up, so there are many:
	// a pause of the machine then falls on every path alike.
	overheadTTFTLevels = []struct{ streams, probes, rounds int }{
		{1, 7200, 72},
		{64, 1800, 6},
		{256, 1800, 6},
	}
	overheadThroughputLevels = []struct{ streams, requestsPerStream int }{
		{64, 36},
		{256, 18},
	}
)

const (
	overheadRounds      = 6
	overheadModel       = "qwen3-8b"
	overheadMaxTokens   = 64  // of a probe or throughput request
	backgroundMaxTokens = 128 // of a background stream's request
	overheadFastSpeedup = 1e6
	overheadMemStreams  = 256
	// overheadMinHeld is the answer length, in tokens, of a prompt the
	// memory phase holds open: at the paced engine's speed it streams for
	// seconds.
	overheadMinHeld = 100
	// backgroundSession prefixes the session ids of background streams,
	// which steeringRouter sends to the paced engine.
	backgroundSession = "load-"
)

// overheadPath is one way to the two engines.
type overheadPath struct {
	name        string
	fast, paced string // base URLs that reach the fast and the paced engine
	client      *http.Client
	// The proxy's process: its CPU time, its resident memory and, for a Go
	// process, its live heap and stacks. Nil on the direct path.
	cpu    func() time.Duration
	rss    func() int64
	memory func() (heap, stack int64, err error)
}

func newBenchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 1024, DisableCompression: true, IdleConnTimeout: 5 * time.Minute,
	}}
}

func findNginx() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// overheadStack is the two engines, in this process, and the gateway in a
// process of its own, as nginx is: the proxy shares the machine, not the
// Go runtime of the clients and engines.
type overheadStack struct {
	fastURL, pacedURL string
	pacedIdle         func() bool // the paced engine has no request left
	gateway           *gatewayProcess
}

func startOverheadStack(ctx context.Context, b testing.TB, tok *tokenizer.Model) *overheadStack {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gpus, err := nodes.ParseSimSpec("1x4090")
	if err != nil {
		b.Fatal(err)
	}
	// The engines outlive the benchmark's context: the gateway, stopped
	// by the cleanup registered after this one, goes first.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g, gctx := errgroup.WithContext(ctx)
	b.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("engines stopped: %v", err)
		}
	})
	var (
		spec      benchGatewaySpec
		instances = make(map[string]*sim.Instance)
	)
	for _, e := range []struct {
		name    string
		speedup float64
	}{{"fast", overheadFastSpeedup}, {"paced", 1}} {
		inst, err := sim.NewInstance(sim.InstanceOptions{
			Engine:   sim.Config{GPU: gpus[0].Kind, Model: overheadModel},
			Listen:   "127.0.0.1:0",
			KVEvents: "tcp://127.0.0.1:0",
			KVReplay: "tcp://127.0.0.1:0",
			Speedup:  e.speedup, Tokenizer: tok, Logger: log,
		})
		if err != nil {
			b.Fatal(err)
		}
		g.Go(func() error { return inst.Run(gctx) })
		instances[e.name] = inst
		spec.Engines = append(spec.Engines, benchEngine{
			Name: e.name, BaseURL: inst.BaseURL(), Events: inst.KVEventsEndpoint(), Replay: inst.KVReplayEndpoint(),
			GPU: gpus[0].Kind, Model: overheadModel, ContextTokens: inst.Config().MaxModelLen,
		})
	}
	gw, err := startGatewayProcess(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(gw.stop)
	paced := instances["paced"]
	return &overheadStack{
		fastURL:  instances["fast"].BaseURL(),
		pacedURL: paced.BaseURL(),
		gateway:  gw,
		pacedIdle: func() bool {
			s := paced.Stats()
			return s.Running == 0 && s.Waiting == 0
		},
	}
}

// --- the gateway process ---

// benchGatewaySpec tells the gateway process which engines to front: as
// Hearth's gateway (Engines), or as a plain Go relay with a listener for
// each engine URL in Relay.
type benchGatewaySpec struct {
	Engines []benchEngine
	Relay   []string
}

type benchEngine struct {
	Name, BaseURL, Events, Replay string
	GPU, Model                    string
	ContextTokens                 int
}

// benchGatewayEnv, when set in the environment of this test binary, holds
// a benchGatewaySpec and makes the binary the benchmark's gateway process
// instead of running tests.
const benchGatewayEnv = "HEARTH_BENCH_GATEWAY"

// benchGatewayProfileEnv names a file for the gateway process's CPU
// profile, to see where its time goes.
const benchGatewayProfileEnv = "HEARTH_BENCH_GATEWAY_PROFILE"

// runBenchGateway wires the router and the gateway as hearth up does, in
// front of engines it did not start, with a key store as hearth up has
// (holding no key), or serves the Go relay. It prints "listening ADDR..."
// when it serves and, on each SIGUSR1, "memory HEAP STACK" (live bytes
// after a collection). It stops when its standard input closes.
func runBenchGateway(specJSON string) error {
	var spec benchGatewaySpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	go reportMemory()
	if len(spec.Relay) > 0 {
		return runGoRelay(ctx, spec.Relay)
	}
	if path := os.Getenv(benchGatewayProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tok, err := tokenizer.Qwen3()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	routerMetrics, err := router.NewMetrics(reg)
	if err != nil {
		return err
	}
	rt, err := router.New(router.Config{Policy: router.PolicyHearth},
		router.WithLogger(log), router.WithMetrics(routerMetrics))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "hearth-bench-gateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "hearth.db"))
	if err != nil {
		return err
	}
	defer db.Close()

	g, gctx := errgroup.WithContext(ctx)
	routes := &gatewayRouter{rt: rt, defaultPolicy: func() string { return "" }}
	engines := newFleet(rt, log)
	for _, e := range spec.Engines {
		profile, err := catalog.ProfileOf(sim.Config{GPU: e.GPU, Model: e.Model}.Perf())
		if err != nil {
			return err
		}
		detach, err := engines.Attach(gctx, hruntime.ReadyEngine{
			Spec:      hruntime.Spec{Name: e.Name, Engine: hruntime.KindVLLM, Simulated: true, Model: e.Model},
			Endpoints: hruntime.Endpoints{BaseURL: e.BaseURL, KVEvents: e.Events, KVReplay: e.Replay, Topic: hruntime.KVEventsTopic},
			Profile: catalog.Profile{
				GPUBlocks: profile.GPUBlocks, CPUBlocks: profile.CPUBlocks, BlockBytes: profile.BlockBytes,
				PrefillTokensPerSec: profile.PrefillTokensPerSec, LoadBytesPerSec: profile.LoadBytesPerSec,
			},
		})
		if err != nil {
			return err
		}
		defer detach()
	}
	gw, err := api.New(api.Config{
		Models: []string{spec.Engines[0].Model}, Aliases: map[string]string{"*": spec.Engines[0].Model},
		ContextTokens: spec.Engines[0].ContextTokens,
	}, api.Deps{
		Router:    steeringRouter{Router: routes, fast: "fast", paced: "paced"},
		Tokenizer: tok, Registry: reg, Logger: log, Keys: apiKeys{&keyStore{db: db}},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", ln.Addr())
	g.Go(func() error { return gw.Serve(gctx, ln) })
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// reportMemory prints "memory HEAP STACK" on each SIGUSR1.
func reportMemory() {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for range usr1 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		fmt.Printf("memory %d %d\n", m.HeapAlloc, m.StackInuse)
	}
}

// runGoRelay serves the Go relay: the floor of a proxy built as the gateway
// is built, with none of its work. Each listener passes chat requests to
// its engine unread and the answer back as it comes, on fiber, over kept
// engine connections that the handler's goroutine writes and reads itself
// with net/http's Request.Write and ReadResponse, as the gateway's engine
// client does. It shows what the language and the server cost on this
// machine; the gateway's distance from it is what decoding, tokenizing,
// routing and translating cost.
func runGoRelay(ctx context.Context, engines []string) error {
	g, gctx := errgroup.WithContext(ctx)
	var addrs []string
	for _, engine := range engines {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs = append(addrs, ln.Addr().String())
		app := goRelayApp(&relayEngine{url: engine})
		g.Go(func() error { return app.Listener(ln) })
		g.Go(func() error {
			<-gctx.Done()
			return app.Shutdown()
		})
	}
	fmt.Printf("listening %s\n", strings.Join(addrs, " "))
	return g.Wait()
}

func goRelayApp(engine *relayEngine) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/v1/chat/completions", func(c *fiber.Ctx) error {
		req, err := http.NewRequest(http.MethodPost, engine.url+"/v1/chat/completions", bytes.NewReader(c.Body()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		body, status, contentType, err := engine.do(req)
		if err != nil {
			return fiber.NewError(fiber.StatusBadGateway, err.Error())
		}
		c.Status(status)
		c.Set(fiber.HeaderContentType, contentType)
		c.Context().SetBodyStream(body, -1)
		return nil
	})
	return app
}

// relayEngine keeps connections to one engine, most recently used first.
type relayEngine struct {
	url  string
	mu   sync.Mutex
	idle []*relayConn
}

type relayConn struct {
	net.Conn
	br *bufio.Reader
}

// do sends req over a kept connection, or a new one, and returns the
// answer's body once its header has arrived. A kept connection the engine
// has closed meanwhile fails before any answer; the request then goes once
// more over a new connection, as net/http's Transport retries it.
func (e *relayEngine) do(req *http.Request) (body io.ReadCloser, status int, contentType string, err error) {
	var conn *relayConn
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		conn, e.idle = e.idle[n-1], e.idle[:n-1]
	}
	e.mu.Unlock()
	if conn != nil {
		resp, err := writeAndRead(conn, req)
		if err == nil {
			return &relayedBody{ReadCloser: resp.Body, engine: e, conn: conn}, resp.StatusCode, resp.Header.Get("Content-Type"), nil
		}
		conn.Close()
		if req.GetBody == nil {
			return nil, 0, "", err
		}
		if req.Body, err = req.GetBody(); err != nil {
			return nil, 0, "", err
		}
	}
	nc, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		return nil, 0, "", err
	}
	conn = &relayConn{Conn: nc, br: bufio.NewReaderSize(nc, 4<<10)}
	resp, err := writeAndRead(conn, req)
	if err != nil {
		conn.Close()
		return nil, 0, "", err
	}
	return &relayedBody{ReadCloser: resp.Body, engine: e, conn: conn}, resp.StatusCode, resp.Header.Get("Content-Type"), nil
}

func writeAndRead(conn *relayConn, req *http.Request) (*http.Response, error) {
	bw := bufio.NewWriterSize(conn, 4<<10)
	if err := req.Write(bw); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return http.ReadResponse(conn.br, req)
}

// relayedBody is an engine's answer as the relay's response body; closing
// it keeps the connection when the answer was read to its end, and closes
// it otherwise.
type relayedBody struct {
	io.ReadCloser
	engine *relayEngine
	conn   *relayConn
	atEOF  bool
}

func (b *relayedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.atEOF = b.atEOF || errors.Is(err, io.EOF)
	return n, err
}

func (b *relayedBody) Close() error {
	b.ReadCloser.Close()
	if !b.atEOF {
		return b.conn.Close()
	}
	b.engine.mu.Lock()
	b.engine.idle = append(b.engine.idle, b.conn)
	b.engine.mu.Unlock()
	return nil
}

// gatewayProcess is the running gateway process, seen from the benchmark.
type gatewayProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // what it prints
	urls  []string      // one for the gateway, one per engine for the relay
	done  chan struct{} // closed when it has exited, with err set
	err   error
}

func startGatewayProcess(spec benchGatewaySpec) (*gatewayProcess, error) {
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), benchGatewayEnv+"="+string(specJSON))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gateway process: %w", err)
	}
	p := &gatewayProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	line, err := p.line(60 * time.Second)
	if err != nil {
		p.stop()
		return nil, err
	}
	addrs, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		p.stop()
		return nil, fmt.Errorf("gateway process said %q", line)
	}
	for _, a := range strings.Fields(addrs) {
		p.urls = append(p.urls, "http://"+a)
	}
	return p, nil
}

// line waits for the next line the process prints.
func (p *gatewayProcess) line(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			return "", fmt.Errorf("gateway process exited: %v", p.err)
		}
		return l, nil
	case <-time.After(timeout):
		return "", errors.New("gateway process is silent")
	}
}

// memory asks the process for its live heap and goroutine stacks.
func (p *gatewayProcess) memory() (heap, stack int64, err error) {
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return 0, 0, err
	}
	line, err := p.line(30 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(line, "memory %d %d", &heap, &stack); err != nil {
		return 0, 0, fmt.Errorf("gateway process said %q: %w", line, err)
	}
	return heap, stack, nil
}

func (p *gatewayProcess) cpu() time.Duration { return procCPU([]int{p.cmd.Process.Pid}) }
func (p *gatewayProcess) rss() int64         { return procRSS([]int{p.cmd.Process.Pid}) }

// stop closes its input, which ends it, and waits.
func (p *gatewayProcess) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// steeringRouter keeps the benchmark's two kinds of traffic apart on one
// gateway: background sessions go to the paced engine and everything else
// to the fast one, as the URL does on the other paths. The real router
// still makes every decision, over the one worker left to it.
type steeringRouter struct {
	api.Router
	fast, paced string // worker names
}

func (s steeringRouter) Route(ctx context.Context, req api.RouteRequest) (api.Route, error) {
	other := s.paced
	if strings.HasPrefix(req.SessionID, backgroundSession) {
		other = s.fast
	}
	req.Exclude = append(req.Exclude, other)
	return s.Router.Route(ctx, req)
}

// --- the client ---

// chatBody is a streamed (or not) chat request for prompt.
func chatBody(prompt string, maxTokens int, stream bool) []byte {
	body, _ := json.Marshal(map[string]any{
		"model":          overheadModel,
		"stream":         stream,
		"stream_options": map[string]any{"include_usage": true},
		"max_tokens":     maxTokens,
		"messages": []map[string]string{
			{"role": "system", "content": "You are a careful coding assistant."},
			{"role": "user", "content": prompt},
		},
	})
	return body
}

// longChatBody is chatBody with Qwen3's thinking block asked for: the
// simulated model's final answers run to a few sentences, and the thinking
// block before them is what makes some answers long enough to hold a
// stream open.
func longChatBody(prompt string, maxTokens int, stream bool) []byte {
	var body map[string]any
	if err := json.Unmarshal(chatBody(prompt, maxTokens, stream), &body); err != nil {
		panic(err)
	}
	body["chat_template_kwargs"] = map[string]any{"enable_thinking": true}
	out, _ := json.Marshal(body)
	return out
}

func cellPrompt(stream, turn int) string {
	return fmt.Sprintf("Stream %d, turn %d: explain what the cache change does.", stream, turn)
}

// streamOptions are what a stream may report as it goes.
type streamOptions struct {
	session string        // sent as x-session-id when set
	onFirst func()        // called when the first content chunk arrives
	chunks  *atomic.Int64 // counts chunks as they arrive
}

// streamOnce sends one streamed chat request and reads it to the end.
func streamOnce(ctx context.Context, client *http.Client, url string, body []byte, o streamOptions) (ttft time.Duration, chunks int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.session != "" {
		req.Header.Set("x-session-id", o.session)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	br := bufio.NewReaderSize(resp.Body, 8<<10)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF && done {
			break
		}
		if err != nil {
			return ttft, chunks, fmt.Errorf("after %d chunks: %w", chunks, err)
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		chunks++
		if o.chunks != nil {
			o.chunks.Add(1)
		}
		if ttft == 0 && hasContent(data) {
			ttft = time.Since(start)
			if o.onFirst != nil {
				o.onFirst()
			}
		}
	}
	if ttft == 0 {
		return 0, chunks, errors.New("no content chunk")
	}
	return ttft, chunks, nil
}

func hasContent(data []byte) bool {
	var ch struct {
		Choices []struct {
			Delta struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return false
	}
	for _, c := range ch.Choices {
		if c.Delta.Content != "" || c.Delta.ReasoningContent != "" {
			return true
		}
	}
	return false
}

// --- time to first token with streams open ---

// ttftResult is one path at one number of open streams.
type ttftResult struct {
	ttfts      []time.Duration
	proxyCPU   time.Duration // the proxy process's CPU time while the probes ran
	background int64         // chunks the background streams received while the probes ran
	elapsed    time.Duration // of the probes
}

func (r *ttftResult) merge(prev *ttftResult) {
	if prev == nil {
		return
	}
	r.ttfts = append(r.ttfts, prev.ttfts...)
	r.background += prev.background
	r.elapsed += prev.elapsed
	r.proxyCPU += prev.proxyCPU
}

// ttftCell opens background streams to the paced engine, waits until each
// has its first content chunk, then sends probes requests to the fast engine
// one after another, and closes the background streams.
func ttftCell(ctx context.Context, p overheadPath, background, probes, firstTurn int, pacedIdle func() bool) (*ttftResult, error) {
	if err := waitFor(ctx, pacedIdle); err != nil {
		return nil, fmt.Errorf("paced engine still busy: %w", err)
	}
	bctx, stop := context.WithCancel(ctx)
	var (
		chunks  atomic.Int64
		started sync.WaitGroup
		running sync.WaitGroup
		failed  atomic.Pointer[error]
	)
	started.Add(background)
	for i := range background {
		running.Add(1)
		go func() {
			defer running.Done()
			var once sync.Once
			signal := func() { once.Do(started.Done) }
			defer signal()
			o := streamOptions{session: fmt.Sprintf("%s%d", backgroundSession, i), onFirst: signal, chunks: &chunks}
			for n := 0; bctx.Err() == nil; n++ {
				body := chatBody(fmt.Sprintf("Background stream %d, request %d: review this diff.", i, n), backgroundMaxTokens, true)
				if _, _, err := streamOnce(bctx, p.client, p.paced, body, o); err != nil && bctx.Err() == nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	started.Wait()
	res := &ttftResult{ttfts: make([]time.Duration, 0, probes)}
	before := chunks.Load()
	var cpu0 time.Duration
	if p.cpu != nil {
		cpu0 = p.cpu()
	}
	start := time.Now()
	var err error
	for i := range probes {
		var ttft time.Duration
		ttft, _, err = streamOnce(ctx, p.client, p.fast, chatBody(cellPrompt(0, firstTurn+i), overheadMaxTokens, true), streamOptions{})
		if err != nil {
			break
		}
		res.ttfts = append(res.ttfts, ttft)
	}
	res.elapsed = time.Since(start)
	res.background = chunks.Load() - before
	if p.cpu != nil {
		res.proxyCPU = p.cpu() - cpu0
	}
	stop()
	running.Wait()
	if e := failed.Load(); e != nil && err == nil {
		err = fmt.Errorf("background stream: %w", *e)
	}
	return res, err
}

// --- relay throughput ---

// throughputResult is one path at one concurrency.
type throughputResult struct {
	chunks   int64
	elapsed  time.Duration
	cpu      time.Duration // this process
	proxyCPU time.Duration // the proxy's processes, when it has its own
}

func (r *throughputResult) merge(prev *throughputResult) {
	if prev == nil {
		return
	}
	r.chunks += prev.chunks
	r.elapsed += prev.elapsed
	r.cpu += prev.cpu
	r.proxyCPU += prev.proxyCPU
}

// throughputCell runs streams concurrent streams of perStream requests each
// to the fast engine.
func throughputCell(ctx context.Context, p overheadPath, streams, perStream, firstTurn int) (*throughputResult, error) {
	bodies := make([][][]byte, streams)
	for s := range bodies {
		for t := range perStream {
			bodies[s] = append(bodies[s], chatBody(cellPrompt(s, firstTurn+t), overheadMaxTokens, true))
		}
	}
	var (
		res    = &throughputResult{}
		chunks atomic.Int64
		proxy0 time.Duration
	)
	if p.cpu != nil {
		proxy0 = p.cpu()
	}
	cpu0 := processCPU()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for s := range streams {
		g.Go(func() error {
			for _, body := range bodies[s] {
				if _, _, err := streamOnce(gctx, p.client, p.fast, body, streamOptions{chunks: &chunks}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := g.Wait()
	res.elapsed = time.Since(start)
	res.cpu = processCPU() - cpu0
	if p.cpu != nil {
		res.proxyCPU = p.cpu() - proxy0
	}
	res.chunks = chunks.Load()
	return res, err
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- memory per open stream ---

type memResult struct {
	heap, stack int64 // growth of this process's live heap and stacks (clients and engines)
	goroutines  int   // growth of this process's goroutines
	proxyRSS    int64 // growth of the proxy's resident memory
	proxyHeap   int64 // growth of the proxy's live heap and stacks, when it is a Go process
	goProxy     bool  // proxyHeap was measured
	open        int   // streams still open when measured
	streams     int
}

// longAnswerPrompts finds prompts whose answers are at least overheadMinHeld
// tokens long by asking the fast engine (answers depend only on the prompt
// and the seed, which the paced engine shares), and returns n bodies
// cycling through them.
func longAnswerPrompts(ctx context.Context, engineURL string, n int) ([][]byte, error) {
	client := newBenchClient()
	defer client.CloseIdleConnections()
	var found []string
	for i := 0; i < 200 && len(found) < 8; i++ {
		prompt := fmt.Sprintf("Session %d: walk me through the router's queue.", i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, engineURL+"/v1/chat/completions",
			bytes.NewReader(longChatBody(prompt, 4*overheadMinHeld, false)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		var out struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		if out.Usage.CompletionTokens >= overheadMinHeld {
			found = append(found, prompt)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no prompt of 200 has an answer of %d tokens", overheadMinHeld)
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = longChatBody(found[i%len(found)], 4*overheadMinHeld, true)
	}
	return bodies, nil
}

// holdStreams opens one stream per body to the paced engine through p,
// waits until each has its first content chunk, measures, and cancels them
// all.
func holdStreams(ctx context.Context, p overheadPath, bodies [][]byte, engineIdle func() bool) (memResult, error) {
	res := memResult{streams: len(bodies)}
	if err := waitFor(ctx, engineIdle); err != nil {
		return res, fmt.Errorf("engine still busy: %w", err)
	}
	client := newBenchClient()
	defer client.CloseIdleConnections()
	proxy := func() (rss, heap int64, err error) {
		if p.rss != nil {
			rss = p.rss()
		}
		if p.memory != nil {
			h, s, err := p.memory()
			return rss, h + s, err
		}
		return rss, 0, nil
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines0 := runtime.NumGoroutine()
	rss0, heap0, err := proxy()
	if err != nil {
		return res, err
	}

	hold, release := context.WithCancel(ctx)
	defer release()
	var (
		first    sync.WaitGroup
		all      sync.WaitGroup
		ended    atomic.Int64
		firstErr atomic.Pointer[error]
	)
	first.Add(len(bodies))
	all.Add(len(bodies))
	for i, body := range bodies {
		go func() {
			defer all.Done()
			var once sync.Once
			signal := func() { once.Do(first.Done) }
			o := streamOptions{session: fmt.Sprintf("%smem-%d", backgroundSession, i), onFirst: signal}
			_, _, err := streamOnce(hold, client, p.paced, body, o)
			if hold.Err() == nil {
				ended.Add(1) // ended on its own: it was not held open
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
			signal()
		}()
	}
	first.Wait()
	var during runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&during)
	res.goroutines = runtime.NumGoroutine() - goroutines0
	rss1, heap1, err := proxy()
	res.open = len(bodies) - int(ended.Load())
	release()
	all.Wait()
	if err != nil {
		return res, err
	}
	if p := firstErr.Load(); p != nil {
		return res, *p
	}
	if res.open < res.streams {
		return res, fmt.Errorf("%d of %d streams ended before they were measured", res.streams-res.open, res.streams)
	}
	res.heap = int64(during.HeapAlloc) - int64(before.HeapAlloc)
	res.stack = int64(during.StackInuse) - int64(before.StackInuse)
	res.proxyRSS, res.proxyHeap, res.goProxy = rss1-rss0, heap1-heap0, p.memory != nil
	return res, nil
}

// waitFor polls cond: the engine's counters have no channel to wait on.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// --- nginx ---

type nginxProc struct {
	cmd  *exec.Cmd
	dir  string
	url  [2]string // in front of the first and the second upstream
	exit chan error
}

const nginxConf = `daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 8192; }
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	keepalive_requests 1000000;
	upstream engine0 { server %[2]s; keepalive 1024; keepalive_requests 1000000; }
	upstream engine1 { server %[3]s; keepalive 1024; keepalive_requests 1000000; }
	server {
		listen %[4]s;
		location / {
			proxy_pass http://engine0;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 300s;
		}
	}
	server {
		listen %[5]s;
		location / {
			proxy_pass http://engine1;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 300s;
		}
	}
}
`

// startNginx runs nginx as a plain reverse proxy in front of two engines,
// in its own process group so that stop ends it and its workers.
func startNginx(ctx context.Context, bin, engine0, engine1 string) (*nginxProc, error) {
	dir, err := os.MkdirTemp("", "hearth-nginx-")
	if err != nil {
		return nil, err
	}
	// nginx's workers drop to an unprivileged user when started as root.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var listen [2]string
	for i := range listen {
		// nginx cannot report a port it picked, so pick one and free it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		listen[i] = ln.Addr().String()
		ln.Close()
	}
	conf := fmt.Sprintf(nginxConf, dir, strings.TrimPrefix(engine0, "http://"), strings.TrimPrefix(engine1, "http://"),
		listen[0], listen[1])
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx: %w", err)
	}
	n := &nginxProc{cmd: cmd, dir: dir, exit: make(chan error, 1)}
	n.url = [2]string{"http://" + listen[0], "http://" + listen[1]}
	go func() { n.exit <- cmd.Wait() }()
	// Wait until it answers, through to an engine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(n.url[0] + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		select {
		case err := <-n.exit:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nginx exited: %v: %s%s", err, stderr.Bytes(), log)
		case <-ctx.Done():
			n.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, errors.New("nginx did not answer within 10s")
		}
	}
}

func (n *nginxProc) stop() {
	pgid := n.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-n.exit:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-n.exit
	}
	// Workers may outlive the master by a moment.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	os.RemoveAll(n.dir)
}

// pids lists the master and its workers.
func (n *nginxProc) pids() []int {
	master := n.cmd.Process.Pid
	pids := []int{master}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(pid); len(f) > 1 && f[1] == strconv.Itoa(master) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat returns the fields of /proc/pid/stat after the command name:
// state, ppid, ...
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// clockTick is USER_HZ, which Linux fixes at 100 for /proc.
const clockTick = 10 * time.Millisecond

func (n *nginxProc) cpu() time.Duration { return procCPU(n.pids()) }
func (n *nginxProc) rss() int64         { return procRSS(n.pids()) }

// procCPU is the processes' user plus system time.
func procCPU(pids []int) time.Duration {
	var t time.Duration
	for _, pid := range pids {
		f := procStat(pid)
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		t += time.Duration(u+s) * clockTick
	}
	return t
}

// procRSS is the processes' resident memory in bytes.
func procRSS(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}

// --- the report ---

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ratio divides Hearth's added cost by nginx's; it means nothing when
// nginx added nothing measurable.
func ratio(hearth, nginx float64) string {
	if nginx <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", hearth/nginx)
}

func overheadReport(b *testing.B, ttft map[string]map[int]*ttftResult, tput map[string]map[int]*throughputResult, mem map[string]memResult) string {
	var out strings.Builder
	cores := float64(runtime.GOMAXPROCS(0))
	names := []string{"direct", "nginx", "go-relay", "hearth"}

	fmt.Fprintf(&out, "time to first token (µs) of probes while N−1 background streams run; %d cores, paths interleaved in rounds\n",
		int(cores))
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tpath\tprobes\tTTFT p50\tTTFT p99\tadded p50\tadded p99\tbackground chunks/s\tproxy CPU ms/s\t")
	for _, lvl := range overheadTTFTLevels {
		n := lvl.streams
		direct := ttft["direct"][n]
		d50, d99 := quantile(direct.ttfts, 0.5), quantile(direct.ttfts, 0.99)
		added := map[string][2]float64{}
		for _, name := range names {
			r := ttft[name][n]
			p50, p99 := quantile(r.ttfts, 0.5), quantile(r.ttfts, 0.99)
			added[name] = [2]float64{micros(p50 - d50), micros(p99 - d99)}
			addedCol := fmt.Sprintf("%.0f\t%.0f", added[name][0], added[name][1])
			if name == "direct" {
				addedCol = "-\t-"
			}
			cpuCol := "-"
			if name != "direct" {
				cpuCol = fmt.Sprintf("%.0f", float64(r.proxyCPU.Milliseconds())/r.elapsed.Seconds())
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%.0f\t%s\t%.0f\t%s\t\n", n, name, len(r.ttfts), micros(p50), micros(p99),
				addedCol, float64(r.background)/r.elapsed.Seconds(), cpuCol)
		}
		for _, floor := range []string{"nginx", "go-relay"} {
			fmt.Fprintf(tw, "%d\thearth/%s\t\t\t\t%s\t%s\t\t\t\n", n, floor,
				ratio(added["hearth"][0], added[floor][0]), ratio(added["hearth"][1], added[floor][1]))
		}
		for _, name := range names[1:] {
			b.ReportMetric(added[name][1], fmt.Sprintf("%s-added-p99-µs@%d", name, n))
		}
	}
	tw.Flush()

	fmt.Fprintf(&out, "\nrelay throughput, streams sending requests back to back\n")
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tpath\tchunks\tchunks/s\tproxy CPU µs/chunk\tcapacity chunks/s\t")
	for _, lvl := range overheadThroughputLevels {
		n := lvl.streams
		direct := tput["direct"][n]
		directCPU := micros(direct.cpu) / float64(direct.chunks)
		proxyCPU := map[string]float64{}
		for _, name := range names {
			r := tput[name][n]
			capCol := fmt.Sprintf("(clients and engines: %.2f)\t-", directCPU)
			if name != "direct" {
				perChunk := micros(r.proxyCPU) / float64(r.chunks)
				proxyCPU[name] = perChunk
				capCol = fmt.Sprintf("%.2f\t-", perChunk)
				if perChunk > 0 {
					capCol = fmt.Sprintf("%.2f\t%.0f", perChunk, cores*1e6/perChunk)
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%s\t\n", n, name, r.chunks, float64(r.chunks)/r.elapsed.Seconds(), capCol)
		}
		for _, floor := range []string{"nginx", "go-relay"} {
			fmt.Fprintf(tw, "%d\thearth/%s\t\t\t%s\t\t\n", n, floor, ratio(proxyCPU["hearth"], proxyCPU[floor]))
		}
		h := tput["hearth"][n]
		b.ReportMetric(float64(h.chunks)/h.elapsed.Seconds(), fmt.Sprintf("hearth-chunks/s@%d", n))
		if proxyCPU["hearth"] > 0 {
			b.ReportMetric(cores*1e6/proxyCPU["hearth"], fmt.Sprintf("hearth-capacity-chunks/s@%d", n))
		}
	}
	tw.Flush()

	fmt.Fprintf(&out, "\nmemory per open stream, %d streams held mid-stream\n", mem["direct"].streams)
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\topen\tclients+engines B/stream\tproxy RSS B/stream\tproxy Go heap+stacks B/stream\t")
	for _, name := range names {
		m := mem[name]
		per := func(v int64) float64 { return float64(v) / float64(m.streams) }
		rss, heap := "-", "-"
		if name != "direct" {
			rss = fmt.Sprintf("%.0f", per(m.proxyRSS))
			b.ReportMetric(per(m.proxyRSS), name+"-RSS-B/stream")
		}
		if m.goProxy {
			heap = fmt.Sprintf("%.0f", per(m.proxyHeap))
			b.ReportMetric(per(m.proxyHeap), name+"-heap-B/stream")
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%.0f\t%s\t%s\t\n", name, m.open, m.streams, per(m.heap+m.stack), rss, heap)
	}
	tw.Flush()
	return out.String()
}
