package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Failure is a start-up failure the simulated engine can be told to have.
type Failure string

const (
	// FailureNone starts normally.
	FailureNone Failure = ""
	// FailureOOM runs out of GPU memory while loading the weights: the
	// engine prints PyTorch's CUDA out-of-memory error and Run fails.
	FailureOOM Failure = "oom"
	// FailureExit fails after loading the weights, with an error line.
	FailureExit Failure = "exit"
)

// ParseFailure parses "" (none), "oom" or "exit".
func ParseFailure(s string) (Failure, error) {
	switch f := Failure(strings.ToLower(strings.TrimSpace(s))); f {
	case FailureNone, FailureOOM, FailureExit:
		return f, nil
	}
	return "", fmt.Errorf("unknown start-up failure %q (want oom or exit)", s)
}

// ErrStartupFailed is what Instance.Run returns, wrapped, when the engine
// was told to fail during start-up (InstanceOptions.Failure).
var ErrStartupFailed = errors.New("sim: engine start-up failed")

// Versions the flavours report.
const vllmVersion = "0.11.0"

// Shares of the start-up delay spent in each phase: downloading the
// weights, loading them, profiling memory (and compiling), capturing CUDA
// graphs, and starting the API server (SGLang: its warm-up request).
const (
	phaseDownload = 0.35
	phaseLoad     = 0.30
	phaseProfile  = 0.10
	phaseGraphs   = 0.20
	phaseServe    = 0.05
)

// startup prints an engine's start-up as the real engine does, over the
// configured delay, and fails where it is told to.
type startup struct {
	kind      hruntime.Kind
	delay     time.Duration
	failure   Failure
	c         *console
	cfg       Config
	gpu       catalog.GPU
	model     catalog.Model
	modelPath string
	served    string
	host      string // as the server announces itself
	port      int
}

// pause waits frac of the start-up delay; false when ctx ended first.
func (s *startup) pause(ctx context.Context, frac float64) bool {
	d := time.Duration(float64(s.delay) * frac)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

const gibF = float64(gib)

// Memory figures of one modelled GPU (one rank under tensor parallelism),
// in GiB, as the engines print them.
func (s *startup) totalGiB() float64   { return float64(s.gpu.MemoryBytes) / gibF }
func (s *startup) weightsGiB() float64 { return s.model.WeightBytes / float64(max(s.cfg.TP, 1)) / gibF }
func (s *startup) kvGiB() float64 {
	return float64(s.cfg.NumGPUBlocks*s.cfg.Perf().RankBlockBytes()) / gibF
}

// freeBeforeLoadGiB is what is free once the CUDA context exists.
func (s *startup) freeBeforeLoadGiB() float64 {
	return s.totalGiB() - catalog.MemoryOf(s.model, catalog.Layout{TP: s.cfg.TP}, s.cfg.MaxNumBatchedTokens).NonTorchBytes/gibF
}

func (s *startup) architecture() string {
	if s.model.Family == catalog.FamilyQwen3Coder {
		return "Qwen3MoeForCausalLM"
	}
	return "Qwen3ForCausalLM"
}

// shards are the weight files, about 4 GB each as Hugging Face checkpoints
// are cut.
func (s *startup) shards() (n int, bytesEach float64) {
	n = max(1, int(math.Ceil(s.model.WeightBytes/4e9)))
	return n, s.model.WeightBytes / float64(n)
}

// download prints huggingface_hub's progress of fetching each weight file,
// at half and at the end of each.
func (s *startup) download(ctx context.Context) bool {
	n, each := s.shards()
	began := time.Now()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
		for _, frac := range []float64{0.5, 1} {
			if !s.pause(ctx, phaseDownload/float64(2*n)) {
				return false
			}
			done := each * frac
			s.c.raw("%s: %3.0f%%|%s| %s/%s %s", name, frac*100, tqdmBar(frac), siBytes(done), siBytes(each),
				tqdmTimes(done+each*float64(i-1), each*float64(n), time.Since(began), "B/s"))
		}
	}
	return true
}

// loadShards prints the loader's progress over the weight files; with the
// OOM failure it stops half way. It reports whether to go on.
func (s *startup) loadShards(ctx context.Context) bool {
	n, _ := s.shards()
	began := time.Now()
	line := func(k int) {
		s.c.raw("Loading safetensors checkpoint shards: %3.0f%% Completed | %d/%d %s", 100*float64(k)/float64(n), k, n,
			tqdmTimes(float64(k), float64(n), time.Since(began), "it/s"))
	}
	line(0)
	for k := 1; k <= n; k++ {
		if !s.pause(ctx, phaseLoad/float64(n)) {
			return false
		}
		if s.failure == FailureOOM && k > (n-1)/2 {
			return true // the caller prints the error where the engine would
		}
		line(k)
	}
	return true
}

// oomMessage is PyTorch's CUDA out-of-memory error for loading one more
// layer of weights on a full GPU.
func (s *startup) oomMessage() string {
	total := s.totalGiB()
	free := total * 0.004
	want := s.model.WeightBytes / float64(max(s.model.Layers, 1)) / (1 << 20)
	inUse := total - free
	return fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f MiB. "+
		"GPU 0 has a total capacity of %.2f GiB of which %.2f MiB is free. "+
		"Including non-PyTorch memory, this process has %.2f GiB memory in use. "+
		"Of the allocated memory %.2f GiB is allocated by PyTorch, and %.2f MiB is reserved by PyTorch but unallocated. "+
		"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
		"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		want, total, free*1024, inUse, inUse-0.45, 21.37)
}

// exitMessage names the failure FailureExit simulates.
const exitMessage = `RuntimeError: simulated engine failure during start-up (failure mode "exit")`

// --- vLLM ---

// runVLLM prints vLLM's start-up up to the moment its API server binds. It
// returns false with a nil error when ctx ended first.
func (s *startup) runVLLM(ctx context.Context) (bool, error) {
	api := func(src, format string, args ...any) { s.c.vllm(vllmAPIServer, "INFO", src, format, args...) }
	core := func(src, format string, args ...any) { s.c.vllm(vllmEngineCore, "INFO", src, format, args...) }
	cfg := s.cfg
	api("api_server.py:1839", "vLLM API server version %s", vllmVersion)
	api("utils.py:233", "non-default args: {'model_tag': '%s', 'host': '%s', 'port': %d, 'model': '%s', "+
		"'served_model_name': ['%s'], 'block_size': %d, 'gpu_memory_utilization': %v, 'max_model_len': %d}",
		s.modelPath, s.host, s.port, s.modelPath, s.served, cfg.BlockSize, cfg.GPUMemoryUtilization, cfg.MaxModelLen)
	api("model.py:547", "Resolved architecture: %s", s.architecture())
	api("model.py:1510", "Using max model len %d", cfg.MaxModelLen)
	api("scheduler.py:205", "Chunked prefill is enabled with max_num_batched_tokens=%d.", cfg.MaxNumBatchedTokens)
	core("core.py:644", "Waiting for init message from front-end.")
	quant := "None"
	if s.model.FP8 {
		quant = "fp8"
	}
	core("core.py:77", "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=None, "+
		"tokenizer='%s', skip_tokenizer_init=False, tokenizer_mode=auto, trust_remote_code=False, dtype=torch.bfloat16, "+
		"max_seq_len=%d, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, "+
		"quantization=%s, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=%d, "+
		"served_model_name=%s, enable_prefix_caching=True, chunked_prefill_enabled=True",
		vllmVersion, s.modelPath, s.modelPath, cfg.MaxModelLen, quant, cfg.Seed, s.served)
	core("parallel_state.py:1208", "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0")
	core("gpu_model_runner.py:2602", "Starting to load model %s...", s.modelPath)
	core("gpu_model_runner.py:2634", "Loading model from scratch...")
	core("cuda.py:366", "Using Flash Attention backend on V1 engine.")
	core("weight_utils.py:392", "Using model weights format ['*.safetensors']")
	downloadBegan := time.Now()
	if !s.download(ctx) {
		return false, nil
	}
	core("weight_utils.py:413", "Time spent downloading weights for %s: %.6f seconds", s.modelPath, time.Since(downloadBegan).Seconds())
	loadBegan := time.Now()
	if !s.loadShards(ctx) {
		return false, nil
	}
	if s.failure == FailureOOM {
		s.vllmEngineCoreTraceback("load_weights", s.oomMessage())
		return false, fmt.Errorf("%w: CUDA out of memory while loading the weights (simulated)", ErrStartupFailed)
	}
	core("default_loader.py:267", "Loading weights took %.2f seconds", time.Since(loadBegan).Seconds())
	core("gpu_model_runner.py:2653", "Model loading took %.4f GiB and %.6f seconds", s.weightsGiB(), time.Since(loadBegan).Seconds())
	initBegan := time.Now()
	core("backends.py:548", "Using cache directory: /root/.cache/vllm/torch_compile_cache/%08x/rank_0_0/backbone for vLLM's torch.compile",
		uint32(rootHash(cfg.Seed)))
	if !s.pause(ctx, phaseProfile) {
		return false, nil
	}
	core("monitor.py:34", "torch.compile takes %.2f s in total", time.Since(initBegan).Seconds())
	core("gpu_worker.py:298", "Available KV cache memory: %.2f GiB", s.kvGiB())
	if s.failure == FailureExit {
		s.vllmEngineCoreTraceback("initialize_from_config", exitMessage)
		return false, fmt.Errorf("%w: told to fail (simulated)", ErrStartupFailed)
	}
	tokens := cfg.NumGPUBlocks * cfg.BlockSize
	core("kv_cache_utils.py:1087", "GPU KV cache size: %s tokens", humanize.Comma(int64(tokens)))
	core("kv_cache_utils.py:1091", "Maximum concurrency for %s tokens per request: %.2fx",
		humanize.Comma(int64(cfg.MaxModelLen)), float64(tokens)/float64(cfg.MaxModelLen))
	graphsBegan := time.Now()
	for _, g := range []struct {
		name string
		n    int
	}{{"mixed prefill-decode, PIECEWISE", 67}, {"decode, FULL", 35}} {
		for _, frac := range []float64{0.5, 1} {
			if !s.pause(ctx, phaseGraphs/4) {
				return false, nil
			}
			done := int(float64(g.n) * frac)
			s.c.raw("Capturing CUDA graphs (%s): %3.0f%%|%s| %d/%d %s", g.name, frac*100, tqdmBar(frac), done, g.n,
				tqdmTimes(float64(done), float64(g.n), time.Since(graphsBegan), "it/s"))
		}
	}
	core("gpu_model_runner.py:3480", "Graph capturing finished in %.0f secs, took 0.52 GiB", time.Since(graphsBegan).Seconds())
	core("core.py:210", "init engine (profile, create kv cache, warmup model) took %.2f seconds", time.Since(initBegan).Seconds())
	api("loggers.py:147", "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d", cfg.NumGPUBlocks)
	if !s.pause(ctx, phaseServe) {
		return false, nil
	}
	api("api_server.py:1634", "Supported_tasks: ['generate']")
	return true, nil
}

// vllmServing prints what vLLM's API server prints once the engine is
// built: where it serves, its routes, uvicorn's start.
func (s *startup) vllmServing() {
	api := func(src, format string, args ...any) { s.c.vllm(vllmAPIServer, "INFO", src, format, args...) }
	api("api_server.py:1912", "Starting vLLM API server 0 on http://%s", hostPort(s.host, s.port))
	api("launcher.py:34", "Available routes are:")
	for _, r := range []struct{ path, methods string }{
		{"/health", "GET"}, {"/metrics", "GET"}, {"/tokenize", "POST"}, {"/detokenize", "POST"},
		{"/v1/models", "GET"}, {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
	} {
		api("launcher.py:42", "Route: %s, Methods: %s", r.path, r.methods)
	}
	s.c.vllmUvicorn("Started server process [%d]", s.c.pid)
	s.c.vllmUvicorn("Waiting for application startup.")
	s.c.vllmUvicorn("Application startup complete.")
}

// vllmEngineCoreTraceback prints the engine core's failure and the API
// server's verdict, as vLLM does when its engine core dies starting.
func (s *startup) vllmEngineCoreTraceback(fn, last string) {
	errLine := func(format string, args ...any) {
		s.c.vllm(vllmEngineCore, "ERROR", "core.py:708", format, args...)
	}
	errLine("EngineCore failed to start.")
	errLine("Traceback (most recent call last):")
	errLine(`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core`)
	errLine("    engine_core = EngineCoreProc(*args, **kwargs)")
	errLine(`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2640, in %s`, fn)
	errLine("%s", last)
	s.c.vllm(vllmAPIServer, "ERROR", "api_server.py:1960",
		"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'%s': 1}", vllmEngineCore)
}

// --- SGLang ---

// runSGLang prints SGLang's start-up up to the end of its scheduler's
// initialisation. It returns false with a nil error when ctx ended first.
func (s *startup) runSGLang(ctx context.Context, serverArgs string) (bool, error) {
	tp := func(format string, args ...any) { s.c.sglang(true, format, args...) }
	cfg := s.cfg
	s.c.sglang(false, "server_args=ServerArgs(%s)", serverArgs)
	tp("Attention backend not explicitly specified. Use flashinfer backend by default.")
	tp("Init torch distributed begin.")
	tp("Init torch distributed ends. mem usage=0.00 GB")
	avail := s.freeBeforeLoadGiB()
	tp("Load weight begin. avail mem=%.2f GB", avail)
	tp("Using model weights format ['*.safetensors']")
	if !s.download(ctx) {
		return false, nil
	}
	if !s.loadShards(ctx) {
		return false, nil
	}
	if s.failure == FailureOOM {
		s.sglangSchedulerTraceback("load_model", s.oomMessage())
		return false, fmt.Errorf("%w: CUDA out of memory while loading the weights (simulated)", ErrStartupFailed)
	}
	avail -= s.weightsGiB()
	tp("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB.",
		s.architecture(), avail, s.weightsGiB())
	tp("Using KV cache dtype: torch.bfloat16")
	if !s.pause(ctx, phaseProfile) {
		return false, nil
	}
	if s.failure == FailureExit {
		s.sglangSchedulerTraceback("init_memory_pool", exitMessage)
		return false, fmt.Errorf("%w: told to fail (simulated)", ErrStartupFailed)
	}
	tokens := cfg.NumGPUBlocks * cfg.BlockSize
	tp("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB", tokens, s.kvGiB()/2, s.kvGiB()/2)
	avail -= s.kvGiB()
	tp("Memory pool end. avail mem=%.2f GB", avail)
	tp("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", avail)
	graphsBegan := time.Now()
	const batches = 23
	for _, frac := range []float64{0.5, 1} {
		if !s.pause(ctx, phaseGraphs/2) {
			return false, nil
		}
		done := int(batches * frac)
		s.c.raw("Capturing batches (bs=%d avail_mem=%.2f GB): %3.0f%%|%s| %d/%d %s", 8*(batches-done+1), avail-0.35*frac,
			frac*100, tqdmBar(frac), done, batches, tqdmTimes(float64(done), batches, time.Since(graphsBegan), "it/s"))
	}
	avail -= 0.35
	tp("Capture cuda graph end. Time elapsed: %.2f s. mem usage=0.35 GB. avail mem=%.2f GB.", time.Since(graphsBegan).Seconds(), avail)
	tp("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=16384, max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB",
		tokens, cfg.MaxNumBatchedTokens, cfg.MaxNumSeqs, cfg.MaxModelLen, avail)
	return true, nil
}

// sglangServing prints uvicorn's start, which SGLang logs once its
// scheduler is up.
func (s *startup) sglangServing() {
	s.c.sglang(false, "INFO:     Started server process [%d]", s.c.pid)
	s.c.sglang(false, "INFO:     Waiting for application startup.")
	s.c.sglang(false, "INFO:     Application startup complete.")
	s.c.sglang(false, "INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)", hostPort(s.host, s.port))
	s.c.sglang(false, `INFO:     127.0.0.1:%d - "GET /get_model_info HTTP/1.1" 200 OK`, 40000+s.c.pid%20000)
}

// sglangReady prints the warm-up request's batch and the ready line.
func (s *startup) sglangReady(warmupTokens int) {
	s.c.sglang(true, "Prefill batch. #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",
		warmupTokens)
	s.c.sglang(false, `INFO:     127.0.0.1:%d - "POST /generate HTTP/1.1" 200 OK`, 40001+s.c.pid%20000)
	s.c.sglang(false, "The server is fired up and ready to roll!")
}

// sglangSchedulerTraceback prints a scheduler that dies starting and the
// main process noticing.
func (s *startup) sglangSchedulerTraceback(fn, last string) {
	s.c.sglang(true, "Scheduler hit an exception: Traceback (most recent call last):")
	s.c.raw(`  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2840, in run_scheduler_process`)
	s.c.raw("    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)")
	s.c.raw(`  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 412, in %s`, fn)
	s.c.raw("%s", last)
	s.c.raw("")
	s.c.sglang(false, "Received sigquit from a child process. It usually means the child failed.")
}

// shutdown prints the API server stopping on a signal.
func (s *startup) shutdown() {
	if s.kind == hruntime.KindSGLang {
		for _, l := range []string{"Shutting down", "Waiting for application shutdown.", "Application shutdown complete."} {
			s.c.sglang(false, "INFO:     %s", l)
		}
		return
	}
	s.c.vllm(vllmAPIServer, "INFO", "launcher.py:99", "Shutting down FastAPI HTTP server.")
	for _, l := range []string{"Shutting down", "Waiting for application shutdown.", "Application shutdown complete."} {
		s.c.vllmUvicorn("%s", l)
	}
}

// hostPort joins a host and port as a URL authority.
func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
