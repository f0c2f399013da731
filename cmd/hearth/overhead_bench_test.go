//go:build linux

package main

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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// BenchmarkGatewayOverhead measures what the gateway adds on top of the
// engine it fronts, against nginx as a plain reverse proxy in the same run:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./cmd/hearth/
//
// One simulated engine (qwen3-8b on a modelled RTX 4090, speedup 1e6, so
// that its modelled GPU time is negligible and only its HTTP work is left)
// is reached three ways: directly, through nginx (proxy_buffering off,
// HTTP/1.1 keep-alive upstream), and through Hearth's gateway wired as
// hearth up wires it (the real router over that one worker, following its
// KV events, and the real Qwen3 tokenizer). Clients run N concurrent
// streams (1, 64, 256) of streamed chat completions over keep-alive
// HTTP/1.1; each stream sends its requests one after another. Every path
// gets the same prompts in the same order, and the paths take turns in
// rounds (the order rotating) so that a burst of load from elsewhere on
// the machine lands on all three.
//
// Time to first token is from sending the request to reading the first
// chunk with content. The time a proxy adds is the shift of the
// distribution's quantiles, p50(proxy) − p50(direct) and p99(proxy) −
// p99(direct): the requests of two paths are not paired, so this is the
// difference of the distributions, not a quantile of per-request
// differences. The ratio divides Hearth's shift by nginx's.
//
// Chunks/s is what the client received end to end. The client, the engine
// and the gateway share this process and its cores, so it is a floor of
// what the gateway alone could relay. The process's CPU time per chunk,
// Hearth's path minus the direct path's, is the gateway's own cost
// (tokenizing, routing, relaying); nginx's is its processes' CPU time per
// chunk from /proc. "capacity" is the machine's cores divided by that cost:
// the chunks per second the proxy could relay if it had every core.
//
// Memory per open stream: a second, slow engine (speedup 0.2) keeps M
// streams open while the client holds them mid-stream (each has its first
// content chunk). The process's live heap plus goroutine stacks after GC,
// minus the same before the streams opened, is divided by M. Through the
// gateway it includes the client's and the engine's share of each stream,
// so the direct path's figure is subtracted: what is left is the gateway's
// (its client connection, its engine connection, the relay). nginx's is the
// growth of its processes' resident memory, which counts pages, not bytes.
//
// Whatever b.N is the work is done once; -benchtime 1x says so.
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

	fast := startOverheadStack(ctx, b, tok, overheadFastSpeedup)
	slow := startOverheadStack(ctx, b, tok, overheadSlowSpeedup)
	ngx, err := startNginx(ctx, nginxBin, fast.engineURL, slow.engineURL)
	if err != nil {
		b.Fatal(err)
	}
	defer ngx.stop()

	paths := []overheadPath{
		{name: "direct", url: fast.engineURL},
		{name: "nginx", url: ngx.url[0]},
		{name: "hearth", url: fast.gatewayURL},
	}
	for i := range paths {
		paths[i].client = newBenchClient()
		defer paths[i].client.CloseIdleConnections()
	}
	// Warm every path: connections, the tokenizer's caches, the router's
	// first decisions.
	for _, p := range paths {
		if _, err := runCell(ctx, p, 256, 1, 1_000_000, nil); err != nil {
			b.Fatalf("warm-up %s: %v", p.name, err)
		}
	}

	b.ResetTimer()
	results := make(map[string]map[int]*cellResult) // path → streams → result
	for _, p := range paths {
		results[p.name] = make(map[int]*cellResult)
	}
	for _, lvl := range overheadLevels {
		for round := range overheadRounds {
			for i := range paths {
				p := paths[(i+round)%len(paths)]
				var nginxCPU func() time.Duration
				if p.name == "nginx" {
					nginxCPU = ngx.cpu
				}
				r, err := runCell(ctx, p, lvl.streams, lvl.requestsPerStream/overheadRounds,
					round*lvl.requestsPerStream/overheadRounds, nginxCPU)
				if err != nil {
					b.Fatalf("%s, %d streams: %v", p.name, lvl.streams, err)
				}
				if prev := results[p.name][lvl.streams]; prev != nil {
					r.merge(prev)
				}
				results[p.name][lvl.streams] = r
			}
		}
	}

	mem := make(map[string]memResult)
	prompts, err := longAnswerPrompts(ctx, fast.engineURL, overheadMemStreams)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []overheadPath{
		{name: "direct", url: slow.engineURL},
		{name: "nginx", url: ngx.url[1]},
		{name: "hearth", url: slow.gatewayURL},
	} {
		r, err := holdStreams(ctx, p.url, prompts, slow.idle, ngx.rss)
		if err != nil {
			b.Fatalf("memory, %s: %v", p.name, err)
		}
		mem[p.name] = r
	}
	b.StopTimer()

	// Printed, not logged: the testing package cuts a benchmark's log to
	// ten lines.
	fmt.Print(overheadReport(b, results, mem))
}

// Settings of the run; the totals keep it under a minute on two cores.
// Each stream's requests are split evenly over the rounds.
var overheadLevels = []struct{ streams, requestsPerStream int }{
	{1, 1200},
	{64, 36},
	{256, 18},
}

const (
	overheadRounds      = 6
	overheadModel       = "qwen3-8b"
	overheadMaxTokens   = 64
	overheadFastSpeedup = 1e6
	overheadSlowSpeedup = 0.2
	overheadMemStreams  = 256
	// overheadMinHeld is the answer length, in tokens, of a prompt the
	// memory phase holds open: at the slow speed it streams for seconds.
	overheadMinHeld = 100
)

type overheadPath struct {
	name, url string
	client    *http.Client
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

// overheadStack is one simulated engine and a gateway in front of it, wired
// as serveUp wires them.
type overheadStack struct {
	engineURL, gatewayURL string
	idle                  func() bool // the engine has no request left
}

func startOverheadStack(ctx context.Context, b testing.TB, tok *tokenizer.Model, speedup float64) *overheadStack {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	gpus, err := nodes.ParseSimSpec("1x4090")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	routerMetrics, err := router.NewMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := router.New(router.Config{Policy: router.PolicyHearth},
		router.WithLogger(log), router.WithMetrics(routerMetrics))
	if err != nil {
		b.Fatal(err)
	}
	cluster, err := newSimCluster(rt, simClusterOptions{
		GPUs: gpus, Model: overheadModel, Speedup: speedup, Tokenizer: tok, Logger: log,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := reg.Register(router.NewIngestCollector(cluster.ingestStats, cluster.workerName)); err != nil {
		b.Fatal(err)
	}
	routes := newGatewayRouter(rt)
	w := cluster.workers[0]
	routes.addWorker(w.id, w.name, w.instance.BaseURL())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gw, err := api.New(api.Config{
		Addr: ln.Addr().String(), Models: []string{overheadModel}, Aliases: map[string]string{"*": overheadModel},
		ContextTokens: w.instance.Config().MaxModelLen,
	}, api.Deps{Router: routes, Tokenizer: tok, Registry: reg, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cluster.Run(gctx) })
	g.Go(func() error { return gw.Serve(gctx, ln) })
	b.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("stack stopped: %v", err)
		}
	})
	return &overheadStack{
		engineURL:  w.instance.BaseURL(),
		gatewayURL: "http://" + ln.Addr().String(),
		idle: func() bool {
			s := w.instance.Stats()
			return s.Running == 0 && s.Waiting == 0
		},
	}
}

// --- the client ---

// chatBody is a small streamed chat request; key picks its prompt, so every
// path can be sent the same sequence.
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

func cellPrompt(stream, turn int) string {
	return fmt.Sprintf("Stream %d, turn %d: explain what the cache change does.", stream, turn)
}

// streamOnce sends one streamed chat request and reads it to the end. It
// calls onFirst, if set, when the first content chunk arrives.
func streamOnce(ctx context.Context, client *http.Client, url string, body []byte, onFirst func()) (ttft time.Duration, chunks int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
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
		if ttft == 0 && hasContent(data) {
			ttft = time.Since(start)
			if onFirst != nil {
				onFirst()
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

// cellResult is one path at one concurrency.
type cellResult struct {
	ttfts    []time.Duration
	chunks   int64
	elapsed  time.Duration
	cpu      time.Duration // this process
	nginxCPU time.Duration // nginx's processes, on its path
}

func (r *cellResult) merge(o *cellResult) {
	r.ttfts = append(r.ttfts, o.ttfts...)
	r.chunks += o.chunks
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.nginxCPU += o.nginxCPU
}

// runCell runs streams concurrent streams of perStream requests each.
func runCell(ctx context.Context, p overheadPath, streams, perStream, firstTurn int, nginxCPU func() time.Duration) (*cellResult, error) {
	bodies := make([][][]byte, streams)
	for s := range bodies {
		for t := range perStream {
			bodies[s] = append(bodies[s], chatBody(cellPrompt(s, firstTurn+t), overheadMaxTokens, true))
		}
	}
	var (
		mu  sync.Mutex
		res = &cellResult{ttfts: make([]time.Duration, 0, streams*perStream)}
	)
	var ngx0 time.Duration
	if nginxCPU != nil {
		ngx0 = nginxCPU()
	}
	cpu0 := processCPU()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for s := range streams {
		g.Go(func() error {
			ttfts := make([]time.Duration, 0, perStream)
			var chunks int64
			for _, body := range bodies[s] {
				ttft, n, err := streamOnce(gctx, p.client, p.url, body, nil)
				if err != nil {
					return err
				}
				ttfts = append(ttfts, ttft)
				chunks += int64(n)
			}
			mu.Lock()
			res.ttfts = append(res.ttfts, ttfts...)
			res.chunks += chunks
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	res.elapsed = time.Since(start)
	res.cpu = processCPU() - cpu0
	if nginxCPU != nil {
		res.nginxCPU = nginxCPU() - ngx0
	}
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
	heap, stack int64 // growth of this process's live heap and stacks
	goroutines  int
	rss         int64 // growth of nginx's resident memory
	open        int   // streams still open when measured
	streams     int
}

// longAnswerPrompts finds prompts whose answers are at least overheadMinHeld
// tokens long by asking the fast engine (answers depend only on the prompt
// and the seed, which the slow engine shares), and returns n bodies cycling
// through them.
func longAnswerPrompts(ctx context.Context, engineURL string, n int) ([][]byte, error) {
	client := newBenchClient()
	defer client.CloseIdleConnections()
	var found []string
	for i := 0; i < 200 && len(found) < 8; i++ {
		prompt := fmt.Sprintf("Session %d: walk me through the router's queue.", i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, engineURL+"/v1/chat/completions",
			bytes.NewReader(chatBody(prompt, 4*overheadMinHeld, false)))
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
		bodies[i] = chatBody(found[i%len(found)], 4*overheadMinHeld, true)
	}
	return bodies, nil
}

// holdStreams opens one stream per body, waits until each has its first
// content chunk, measures, and cancels them all.
func holdStreams(ctx context.Context, url string, bodies [][]byte, engineIdle func() bool, nginxRSS func() int64) (memResult, error) {
	res := memResult{streams: len(bodies)}
	if err := waitFor(ctx, engineIdle); err != nil {
		return res, fmt.Errorf("engine still busy: %w", err)
	}
	client := newBenchClient()
	defer client.CloseIdleConnections()
	var before runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines0, rss0 := runtime.NumGoroutine(), nginxRSS()

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
	for _, body := range bodies {
		go func() {
			defer all.Done()
			var once sync.Once
			signal := func() { once.Do(first.Done) }
			_, _, err := streamOnce(hold, client, url, body, signal)
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
	res.rss = nginxRSS() - rss0
	res.open = len(bodies) - int(ended.Load())
	release()
	all.Wait()
	if p := firstErr.Load(); p != nil {
		return res, *p
	}
	res.heap = int64(during.HeapAlloc) - int64(before.HeapAlloc)
	res.stack = int64(during.StackInuse) - int64(before.StackInuse)
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

// cpu is nginx's processes' user plus system time.
func (n *nginxProc) cpu() time.Duration {
	var t time.Duration
	for _, pid := range n.pids() {
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

// rss is nginx's processes' resident memory in bytes.
func (n *nginxProc) rss() int64 {
	var total int64
	for _, pid := range n.pids() {
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

func overheadReport(b *testing.B, results map[string]map[int]*cellResult, mem map[string]memResult) string {
	var out strings.Builder
	cores := float64(runtime.GOMAXPROCS(0))
	fmt.Fprintf(&out, "time to first token (µs), chunks, CPU; %d cores, %d rounds per cell, paths interleaved\n",
		int(cores), overheadRounds)
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tpath\trequests\tTTFT p50\tTTFT p99\tadded p50\tadded p99\tchunks\tchunks/s\tproxy CPU µs/chunk\tcapacity chunks/s\t")
	for _, lvl := range overheadLevels {
		n := lvl.streams
		direct := results["direct"][n]
		d50, d99 := quantile(direct.ttfts, 0.5), quantile(direct.ttfts, 0.99)
		directCPU := micros(direct.cpu) / float64(direct.chunks)
		added := map[string][2]float64{}
		proxyCPU := map[string]float64{}
		for _, name := range []string{"direct", "nginx", "hearth"} {
			r := results[name][n]
			p50, p99 := quantile(r.ttfts, 0.5), quantile(r.ttfts, 0.99)
			a50, a99 := micros(p50-d50), micros(p99-d99)
			added[name] = [2]float64{a50, a99}
			perChunk, addedCol, capCol := 0.0, "", ""
			switch name {
			case "nginx":
				perChunk = micros(r.nginxCPU) / float64(r.chunks)
			case "hearth":
				perChunk = micros(r.cpu)/float64(r.chunks) - directCPU
			}
			proxyCPU[name] = perChunk
			if name != "direct" {
				addedCol = fmt.Sprintf("%.0f\t%.0f", a50, a99)
				if perChunk > 0 {
					capCol = fmt.Sprintf("%.2f\t%.0f", perChunk, cores*1e6/perChunk)
				} else {
					capCol = fmt.Sprintf("%.2f\t-", perChunk)
				}
			} else {
				addedCol, capCol = "-\t-", fmt.Sprintf("(all: %.2f)\t-", directCPU)
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%.0f\t%s\t%d\t%.0f\t%s\t\n", n, name, len(r.ttfts), micros(p50), micros(p99),
				addedCol, r.chunks, float64(r.chunks)/r.elapsed.Seconds(), capCol)
		}
		fmt.Fprintf(tw, "%d\thearth/nginx\t\t\t\t%s\t%s\t\t\t%s\t\t\n", n,
			ratio(added["hearth"][0], added["nginx"][0]), ratio(added["hearth"][1], added["nginx"][1]),
			ratio(proxyCPU["hearth"], proxyCPU["nginx"]))

		b.ReportMetric(added["hearth"][1], fmt.Sprintf("hearth-added-p99-µs@%d", n))
		b.ReportMetric(added["nginx"][1], fmt.Sprintf("nginx-added-p99-µs@%d", n))
		if added["nginx"][1] > 0 {
			b.ReportMetric(added["hearth"][1]/added["nginx"][1], fmt.Sprintf("hearth/nginx-added-p99@%d", n))
		}
		if n == overheadLevels[len(overheadLevels)-1].streams {
			h := results["hearth"][n]
			b.ReportMetric(float64(h.chunks)/h.elapsed.Seconds(), fmt.Sprintf("hearth-chunks/s@%d", n))
			if proxyCPU["hearth"] > 0 {
				b.ReportMetric(cores*1e6/proxyCPU["hearth"], fmt.Sprintf("hearth-capacity-chunks/s@%d", n))
			}
		}
	}
	tw.Flush()

	fmt.Fprintf(&out, "\nmemory per open stream, %d streams held mid-stream\n", mem["direct"].streams)
	tw = tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\topen\theap B/stream\tstack B/stream\tgoroutines/stream\tnginx RSS B/stream\tproxy's own B/stream\t")
	direct := mem["direct"]
	directPer := float64(direct.heap+direct.stack) / float64(direct.streams)
	for _, name := range []string{"direct", "nginx", "hearth"} {
		m := mem[name]
		per := func(v int64) float64 { return float64(v) / float64(m.streams) }
		own, rss := "-", "-"
		switch name {
		case "nginx":
			own = fmt.Sprintf("%.0f", per(m.rss))
			rss = own
			b.ReportMetric(per(m.rss), "nginx-B/stream")
		case "hearth":
			v := per(m.heap+m.stack) - directPer
			own = fmt.Sprintf("%.0f", v)
			b.ReportMetric(v, "hearth-B/stream")
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%.0f\t%.0f\t%.2f\t%s\t%s\t\n", name, m.open, m.streams, per(m.heap), per(m.stack),
			float64(m.goroutines)/float64(m.streams), rss, own)
	}
	tw.Flush()
	return out.String()
}
