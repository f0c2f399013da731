package runtime

import (
	"slices"
	"strings"
	"testing"
)

// vllmStart is a vLLM 0.1x start in a container, cut to the lines that
// matter and a few that do not, as `docker logs` shows it.
var vllmStart = []string{
	"INFO 01-23 15:48:31 [api_server.py:1896] vLLM API server version 0.11.0",
	"INFO 01-23 15:48:31 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-14B-FP8', 'max_model_len': 32768}",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-14B-FP8...",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2634] Loading model from scratch...",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [cuda.py:366] Using Flash Attention backend on V1 engine.",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [weight_utils.py:392] Using model weights format ['*.safetensors']",
	"model-00001-of-00004.safetensors:  45%|████▌     | 1.80G/4.00G [00:12<00:15, 150MB/s]",
	"model-00002-of-00004.safetensors:  10%|█         | 400M/4.00G [00:03<00:27, 133MB/s]",
	"model-00001-of-00004.safetensors: 100%|██████████| 4.00G/4.00G [00:27<00:00, 148MB/s]",
	"model-00002-of-00004.safetensors: 100%|██████████| 4.00G/4.00G [00:30<00:00, 133MB/s]",
	"model-00003-of-00004.safetensors: 100%|██████████| 4.00G/4.00G [00:29<00:00, 137MB/s]",
	"model-00004-of-00004.safetensors: 100%|██████████| 3.20G/3.20G [00:22<00:00, 145MB/s]",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:50:47 [weight_utils.py:413] Time spent downloading weights for Qwen/Qwen3-14B-FP8: 120.412305 seconds",
	"Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
	"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:03<00:03,  1.52s/it]",
	"Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:06<00:00,  1.50s/it]",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:50:53 [default_loader.py:267] Loading weights took 6.02 seconds",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:50:54 [gpu_model_runner.py:2653] Model loading took 15.1 GiB and 6.8 seconds",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:02 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/3b2f0e/rank_0_0/backbone for vLLM's torch.compile",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:02 [backends.py:559] Dynamo bytecode transform time: 7.91 s",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:30 [monitor.py:34] torch.compile takes 33.1 s in total",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:33 [gpu_worker.py:298] Available KV cache memory: 4.83 GiB",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:33 [kv_cache_utils.py:1087] GPU KV cache size: 31,648 tokens",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:33 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 0.97x",
	"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|████      | 27/67 [00:05<00:07,  5.43it/s]",
	"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:12<00:00,  5.43it/s]",
	"Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:05<00:00,  6.23it/s]",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:52 [gpu_model_runner.py:3480] Graph capturing finished in 18 secs, took 0.61 GiB",
	"(EngineCore_DP0 pid=164) INFO 01-23 15:51:52 [core.py:210] init engine (profile, create kv cache, warmup model) took 58.02 seconds",
	"(APIServer pid=1) INFO 01-23 15:51:54 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
	"(APIServer pid=1) INFO 01-23 15:51:54 [launcher.py:36] Available routes are:",
	"(APIServer pid=1) INFO:     Started server process [1]",
	"(APIServer pid=1) INFO:     Waiting for application startup.",
	"(APIServer pid=1) INFO:     Application startup complete.",
	"(APIServer pid=1) INFO:     127.0.0.1:51234 - \"GET /v1/models HTTP/1.1\" 200 OK",
}

// sglangStart is an SGLang start, as `docker logs` shows it.
var sglangStart = []string{
	"[2025-08-08 03:34:20] server_args=ServerArgs(model_path='Qwen/Qwen3-14B-FP8', tokenizer_path='Qwen/Qwen3-14B-FP8', context_length=32768, page_size=16)",
	"[2025-08-08 03:34:31] Init torch distributed begin.",
	"[2025-08-08 03:34:32] Init torch distributed ends. mem usage=0.00 GB",
	"[2025-08-08 03:34:33] Load weight begin. avail mem=22.91 GB",
	"[2025-08-08 03:34:33] Using model weights format ['*.safetensors']",
	"[2025-08-08 03:34:34] Time spent downloading weights for Qwen/Qwen3-14B-FP8: 0.412305 seconds",
	"Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
	"Loading safetensors checkpoint shards:  75% Completed | 3/4 [00:05<00:01,  1.90s/it]",
	"Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:07<00:00,  1.84s/it]",
	"[2025-08-08 03:34:41] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=7.80 GB, mem usage=15.11 GB.",
	"[2025-08-08 03:34:41] KV Cache is allocated. #tokens: 41360, K size: 2.52 GB, V size: 2.52 GB",
	"[2025-08-08 03:34:41] Memory pool end. avail mem=2.43 GB",
	"[2025-08-08 03:34:42] Capture cuda graph begin. This can take up to several minutes. avail mem=1.80 GB",
	"[2025-08-08 03:34:42] Capture cuda graph bs [1, 2, 4, 8]",
	"Capturing batches (bs=4 avail_mem=1.76 GB):  50%|█████     | 2/4 [00:09<00:09,  4.57s/it]",
	"Capturing batches (bs=1 avail_mem=1.72 GB): 100%|██████████| 4/4 [00:18<00:00,  4.57s/it]",
	"[2025-08-08 03:35:00] Capture cuda graph end. Time elapsed: 18.28 s. mem usage=0.11 GB. avail mem=1.70 GB.",
	"[2025-08-08 03:35:01] max_total_num_tokens=41360, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=32768",
	"[2025-08-08 03:35:02] INFO:     Started server process [1]",
	"[2025-08-08 03:35:02] INFO:     Waiting for application startup.",
	"[2025-08-08 03:35:02] INFO:     Application startup complete.",
	"[2025-08-08 03:35:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
	"[2025-08-08 03:35:03] INFO:     127.0.0.1:40262 - \"GET /get_model_info HTTP/1.1\" 200 OK",
	"[2025-08-08 03:35:04] The server is fired up and ready to roll!",
}

// upTo returns the lines of a log up to and including the first that
// contains marker.
func upTo(t *testing.T, log []string, marker string) []string {
	t.Helper()
	for i, l := range log {
		if strings.Contains(l, marker) {
			return slices.Clone(log[:i+1]) // callers append to it
		}
	}
	t.Fatalf("no line contains %q", marker)
	return nil
}

func TestParseLoad(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  LoadState
	}{
		{"nothing yet", nil, LoadState{Progress: -1}},
		{"only unknown lines", []string{"hello", "INFO 01-23 15:48:31 [api_server.py:1896] vLLM API server version 0.11.0"}, LoadState{Progress: -1}},

		// vLLM
		{"vllm: loading starts", upTo(t, vllmStart, "Starting to load model"), LoadState{Phase: PhaseLoading, Progress: -1}},
		{"vllm: looking for weights", upTo(t, vllmStart, "Using model weights format"), LoadState{Phase: PhaseDownloading, Progress: -1, Downloaded: true}},
		// Shard 1 at 1.8 of 4.0 GB, shard 2 at 0.4 of 4.0, two shards not
		// started counted at the 4.0 GB average: 2.2 of 16 GB.
		{"vllm: two shards downloading of four", upTo(t, vllmStart, "400M/4.00G"), LoadState{Phase: PhaseDownloading, Progress: 13, Downloaded: true}},
		{"vllm: all shards downloaded", upTo(t, vllmStart, "3.20G/3.20G"), LoadState{Phase: PhaseDownloading, Progress: 100, Downloaded: true}},
		{"vllm: download done", upTo(t, vllmStart, "Time spent downloading"), LoadState{Phase: PhaseLoading, Progress: -1, Downloaded: true}},
		{"vllm: shards half loaded", upTo(t, vllmStart, "2/4 [00:03"), LoadState{Phase: PhaseLoading, Progress: 50, Downloaded: true}},
		{"vllm: weights loaded", upTo(t, vllmStart, "Loading weights took"), LoadState{Phase: PhaseLoading, Progress: 100, Downloaded: true}},
		{"vllm: model loaded", upTo(t, vllmStart, "Model loading took"), LoadState{Phase: PhaseProfiling, Progress: -1, Downloaded: true}},
		{"vllm: compiling", upTo(t, vllmStart, "Dynamo bytecode"), LoadState{Phase: PhaseCompiling, Progress: -1, Downloaded: true}},
		{"vllm: kv cache sized", upTo(t, vllmStart, "GPU KV cache size"), LoadState{Phase: PhaseProfiling, Progress: -1, Downloaded: true}},
		{"vllm: capturing", upTo(t, vllmStart, "27/67"), LoadState{Phase: PhaseCapturing, Progress: 40, Downloaded: true}},
		{"vllm: graphs captured", upTo(t, vllmStart, "Graph capturing finished"), LoadState{Phase: PhaseStarting, Progress: -1, Downloaded: true}},
		{"vllm: api server", upTo(t, vllmStart, "Starting vLLM API server"), LoadState{Phase: PhaseStarting, Progress: -1, Downloaded: true}},
		{"vllm: ready", vllmStart, LoadState{Phase: PhaseReady, Progress: -1, Downloaded: true}},
		{"vllm: newer server line", []string{"(APIServer pid=1) INFO 02-07 15:46:20 [api_server.py:1468] Starting vLLM server on http://0.0.0.0:8000"}, LoadState{Phase: PhaseStarting, Progress: -1}},

		// SGLang, weights already cached
		{"sglang: loading", upTo(t, sglangStart, "Load weight begin"), LoadState{Phase: PhaseLoading, Progress: -1}},
		{"sglang: cache hit is no download", upTo(t, sglangStart, "Time spent downloading"), LoadState{Phase: PhaseLoading, Progress: -1}},
		{"sglang: shards", upTo(t, sglangStart, "3/4 [00:05"), LoadState{Phase: PhaseLoading, Progress: 75}},
		{"sglang: weights loaded", upTo(t, sglangStart, "Load weight end"), LoadState{Phase: PhaseProfiling, Progress: -1}},
		{"sglang: memory pool", upTo(t, sglangStart, "Memory pool end"), LoadState{Phase: PhaseProfiling, Progress: -1}},
		{"sglang: capture begins", upTo(t, sglangStart, "Capture cuda graph begin"), LoadState{Phase: PhaseCapturing, Progress: -1}},
		{"sglang: capturing batches", upTo(t, sglangStart, "2/4 [00:09"), LoadState{Phase: PhaseCapturing, Progress: 50}},
		{"sglang: captured", upTo(t, sglangStart, "Capture cuda graph end"), LoadState{Phase: PhaseStarting, Progress: -1}},
		{"sglang: uvicorn up is not ready yet", upTo(t, sglangStart, "Uvicorn running"), LoadState{Phase: PhaseStarting, Progress: -1}},
		{"sglang: ready", sglangStart, LoadState{Phase: PhaseReady, Progress: -1}},

		// Downloads, as the several versions of huggingface_hub draw them.
		{"hub: one bar over all bytes", []string{
			"Fetching 11 files:   0%|          | 0/11 [00:00<?, ?it/s]",
			"Downloading (incomplete total...): 0.00B [00:00, ?B/s]",
			"Downloading (incomplete total...):  45%|████▌     | 7.20G/16.0G [01:00<01:10, 125MB/s]",
		}, LoadState{Phase: PhaseDownloading, Progress: 45, Downloaded: true}},
		{"hub: aggregate bar complete", []string{
			"Downloading (incomplete total...):  99%|█████████▉| 15.9G/16.0G [02:10<00:01, 125MB/s]",
			"Download complete: 100%|██████████| 16.0G/16.0G [02:11<00:00, 125MB/s]",
		}, LoadState{Phase: PhaseDownloading, Progress: 100, Downloaded: true}},
		{"hub: only the file count", []string{
			"Fetching 4 files:  25%|██▌       | 1/4 [00:30<01:30, 30.00s/it]",
		}, LoadState{Phase: PhaseDownloading, Progress: 25, Downloaded: true}},
		{"hub: small files do not skew the shards", []string{
			"config.json: 100%|██████████| 1.20k/1.20k [00:00<00:00, 5.1MB/s]",
			"model-00001-of-00002.safetensors:  50%|█████     | 2.50G/5.00G [00:20<00:20, 125MB/s]",
		}, LoadState{Phase: PhaseDownloading, Progress: 25, Downloaded: true}},
		{"hub: a late small download does not go back", append(upTo(t, vllmStart, "Starting vLLM API server"),
			"generation_config.json: 100%|██████████| 239/239 [00:00<00:00, 1.9MB/s]"),
			LoadState{Phase: PhaseStarting, Progress: -1, Downloaded: true}},
		{"a long download without bars counts", []string{
			"INFO 08-06 20:11:33 [weight_utils.py:530] Time spent downloading weights for google/gemma-4-31B-it: 64.511670 seconds",
		}, LoadState{Phase: PhaseLoading, Progress: -1, Downloaded: true}},

		// Odd output
		{"colour codes", []string{"\x1b[32mINFO\x1b[0m 01-23 15:50:54 Model loading took 15.1 GiB and 6.8 seconds"}, LoadState{Phase: PhaseProfiling, Progress: -1}},
		{"a percent sign elsewhere", []string{"GPU util 100% | temp 60C", "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03]"}, LoadState{Phase: PhaseLoading, Progress: 25}},
		{"a bar with nonsense counts", []string{"model.safetensors:  10%|█         | x/y [00:01<00:09]"}, LoadState{Progress: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseLoad(tc.lines); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLoadTrackerMatchesParseLoad: reading a log in pieces gives what
// reading it whole gives.
func TestLoadTrackerMatchesParseLoad(t *testing.T) {
	for _, log := range [][]string{vllmStart, sglangStart} {
		var tr LoadTracker
		for i, l := range log {
			tr.Line(l)
			if got, want := tr.State(), ParseLoad(log[:i+1]); got != want {
				t.Fatalf("after line %d %q: tracker %+v, ParseLoad %+v", i, l, got, want)
			}
		}
	}
}

func TestPhaseLabels(t *testing.T) {
	for _, p := range []LoadPhase{PhaseDownloading, PhaseLoading, PhaseCompiling, PhaseProfiling, PhaseCapturing, PhaseStarting, PhaseReady} {
		if l := p.Label(); l == "" || l == string(p) && p != PhaseReady {
			t.Errorf("phase %q has no label", p)
		}
	}
}

// FuzzParseLoad: whatever an engine prints, parsing does not panic and the
// progress is -1 or a percentage.
func FuzzParseLoad(f *testing.F) {
	f.Add(strings.Join(vllmStart, "\n"))
	f.Add(strings.Join(sglangStart, "\n"))
	f.Add("model-00001-of-99999.safetensors: 1e400%|| 1e300P/0.00B [")
	f.Add("Downloading: 5%|x| -1G/NaN")
	f.Add("\x1b[31m(x) 100% Completed | 9/0")
	f.Fuzz(func(t *testing.T, log string) {
		st := ParseLoad(strings.Split(log, "\n"))
		if st.Progress != -1 && (st.Progress < 0 || st.Progress > 100) {
			t.Fatalf("progress %d", st.Progress)
		}
		if st.Phase == "" && st.Progress != -1 {
			t.Fatalf("progress %d without a phase", st.Progress)
		}
	})
}

func BenchmarkParseLoad(b *testing.B) {
	log := make([]string, 0, 1000)
	for len(log) < 1000 {
		log = append(log, vllmStart...)
	}
	b.ReportAllocs()
	for b.Loop() {
		ParseLoad(log)
	}
}
