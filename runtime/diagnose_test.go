package runtime

import (
	"errors"
	"strings"
	"testing"
)

// traceback wraps an error's last lines in what a Python engine prints
// before them.
func traceback(last ...string) []string {
	return append([]string{
		"(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708] EngineCore failed to start.",
		"(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708] Traceback (most recent call last):",
		`(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core`,
	}, last...)
}

func TestDiagnose(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		err   error
		cause Cause
		want  []string // fragments of the message
	}{
		// Out of memory
		{"torch OOM while capturing graphs", append(upTo(t, vllmStart, "27/67"), traceback(
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 22.48 GiB memory in use.",
		)...), nil, CauseOutOfMemory, []string{"CUDA ran out of memory while capturing CUDA graphs", "2.00 GiB", "1.06 GiB of 23.55 GiB was free", "lower --max-model-len or use a smaller model"}},
		{"old torch OOM", traceback(
			"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.69 GiB total capacity; 22.91 GiB already allocated)",
		), nil, CauseOutOfMemory, []string{"CUDA ran out of memory (it needed 20.00 MiB more)", "lower --max-model-len"}},
		{"CUDA error out of memory", []string{"RuntimeError: CUDA error: out of memory"}, nil, CauseOutOfMemory, []string{"CUDA ran out of memory: lower --max-model-len"}},
		{"vLLM: KV cache too small for the context", traceback(
			"(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.47 GiB). Based on the available memory, the estimated maximum model length is 77584. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
		), nil, CauseOutOfMemory, []string{"context of 131072 tokens needs 16.00 GiB", "only 9.47 GiB", "lower --max-model-len to 77584 or less, or use a smaller model"}},
		{"vLLM: older KV tokens check", []string{
			"ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20000). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
		}, nil, CauseOutOfMemory, []string{"holds only 20000 tokens", "context of 32768", "lower --max-model-len to 20000 or less"}},
		{"vLLM: no memory for cache blocks", traceback(
			"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
		), nil, CauseOutOfMemory, []string{"no GPU memory for the KV cache", "smaller model"}},
		{"SGLang: not enough memory", []string{
			"[2025-08-08 03:34:41] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=0.80 GB, mem usage=22.11 GB.",
			"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88",
		}, nil, CauseOutOfMemory, []string{"no GPU memory for the KV cache"}},
		{"vLLM: another program holds memory", []string{
			"ValueError: Free memory on device cuda:0 (7.34/15.49 GiB) on startup is less than desired GPU memory utilization (0.9, 13.94 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
		}, nil, CauseOutOfMemory, []string{"only 7.34 of the GPU's 15.49 GiB is free", "0.9 share", "nvidia-smi", "--gpu-memory-utilization below 0.47"}},

		// Hugging Face
		{"gated model without a token", traceback(
			"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-688b505e-01cc67f573bc583469af8f8e)",
			"Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.",
			"Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be authenticated to access it. Please log in.",
		), nil, CauseGatedModel, []string{"meta-llama/Llama-3.1-8B-Instruct is a gated model", "set HF_TOKEN to a token with access to it", "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct"}},
		{"gated model, token without access", []string{
			"huggingface_hub.errors.GatedRepoError: 403 Client Error.",
			"Cannot access gated repo for url https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.1/resolve/main/config.json.",
			"Access to model mistralai/Mistral-7B-Instruct-v0.1 is restricted and you are not in the authorized list. Visit https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.1 to ask for access.",
		}, nil, CauseGatedModel, []string{"HF_TOKEN has no access to the gated model mistralai/Mistral-7B-Instruct-v0.1", "ask for access at https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.1"}},
		{"gated model through transformers", []string{
			"OSError: You are trying to access a gated repo.",
			"Make sure to have access to it at https://huggingface.co/google/gemma-3-27b-it.",
			"401 Client Error. (Request ID: Root=1-6)",
		}, nil, CauseGatedModel, []string{"google/gemma-3-27b-it is a gated model"}},
		{"model not found", traceback(
			"huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-67a1)",
			"Repository Not Found for url: https://huggingface.co/api/models/Qwen/Qwen3-14B-FP9/revision/main.",
			"Please make sure you specified the correct `repo_id` and `repo_type`.",
			"If you are trying to access a private or gated repo, make sure you are authenticated. For more details, see https://huggingface.co/docs/huggingface_hub/authentication",
			"Invalid username or password.",
		), nil, CauseModelNotFound, []string{"no model Qwen/Qwen3-14B-FP9 on Hugging Face", "check its name"}},
		{"not a valid model identifier", []string{
			"OSError: Qwen/Qwen9-1B is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
			"If this is a private repository, make sure to pass a token having permission to this repo either by logging in with `hf auth login` or by passing `token=<your_token>`",
		}, nil, CauseModelNotFound, []string{"no model Qwen/Qwen9-1B"}},
		{"vLLM: invalid repository", []string{"ValueError: Invalid repository ID or local directory specified: 'qwen3-14b-fp8'."}, nil, CauseModelNotFound, []string{"no model qwen3-14b-fp8"}},

		// Driver and runtime
		{"driver too old for a CUDA 13 image", nil,
			errors.New(`docker: start container: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'
nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a newer version, or use an earlier cuda container: unknown`),
			CauseDriverTooOld, []string{"CUDA 13.0", "-cu129", "update the driver to R580 or newer"}},
		{"driver too old for CUDA 12.9", nil,
			errors.New("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your driver to a newer version, or use an earlier cuda container: unknown"),
			CauseDriverTooOld, []string{"CUDA 12.9", "update the driver to R575 or newer"}},
		{"CUDA runtime newer than the driver", []string{"RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"}, nil, CauseDriverTooOld, []string{"-cu129", "update the driver"}},
		{"forward compatibility", []string{"RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW"}, nil, CauseDriverTooOld, []string{"update the driver"}},
		{"torch says the driver is too old", []string{"RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx"}, nil, CauseDriverTooOld, []string{"only CUDA 12.2"}},
		{"no NVIDIA runtime", nil, errors.New(`docker: create container: Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]`), CauseNoNVIDIARuntime, []string{"install the NVIDIA Container Toolkit", "`hearth doctor`"}},
		{"no nvidia runtime name", nil, errors.New("Error response from daemon: unknown or invalid runtime name: nvidia"), CauseNoNVIDIARuntime, []string{"NVIDIA Container Toolkit"}},

		// Ports and disks
		{"uvicorn port taken", []string{"(APIServer pid=1) ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"}, nil, CausePortInUse, []string{"port 8000 is already in use", "sport = :8000"}},
		{"python bind", []string{"OSError: [Errno 98] Address already in use"}, nil, CausePortInUse, []string{"a port the engine needs is already in use"}},
		{"docker port allocated", nil, errors.New("Error response from daemon: driver failed programming external connectivity on endpoint hearth-gpu0: Bind for 0.0.0.0:8100 failed: port is already allocated"), CausePortInUse, []string{"port 8100"}},
		{"docker proxy bind", nil, errors.New("Error starting userland proxy: listen tcp4 0.0.0.0:8101: bind: address already in use"), CausePortInUse, []string{"port 8101"}},
		{"zmq port taken", []string{"zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')"}, nil, CausePortInUse, []string{"port 5557"}},
		{"disk full with a path", traceback("OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--Qwen--Qwen3-14B-FP8/blobs/abc.incomplete'"), nil, CauseDiskFull, []string{"the disk is full (writing /root/.cache/huggingface/hub/", "HF_HOME"}},
		{"docker pull disk full", nil, errors.New("pull vllm/vllm-openai:v0.20.0: write /var/lib/docker/tmp/GetImageBlob123: no space left on device"), CauseDiskFull, []string{"the disk is full"}},

		// SGLang's host pool guard (pool_host/base.py).
		{"SGLang: host tier over host memory", traceback(
			"ValueError: Not enough host memory available. Requesting 34.00 GB but only have 12.05 GB free. Please reduce the size of the hierarchical cache.",
		), nil, CauseHostMemory, []string{"host KV tier of 34.00 GB per rank", "12.05 GB", "10 GiB", "lower --kv-offloading-size"}},
		// Precedence: the error the engine died of is the last one.
		{"the newest error wins", []string{
			"WARNING: [Errno 98] Address already in use, retrying on another port",
			"torch.OutOfMemoryError: CUDA out of memory.",
		}, nil, CauseOutOfMemory, []string{"CUDA ran out of memory"}},
		{"the launcher's error before the log", []string{"torch.OutOfMemoryError: CUDA out of memory."},
			errors.New(`could not select device driver "nvidia" with capabilities: [[gpu]]`), CauseNoNVIDIARuntime, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := Diagnose(tc.lines, tc.err)
			if !ok {
				t.Fatalf("no diagnosis, want %s", tc.cause)
			}
			t.Log(d.Message)
			if d.Cause != tc.cause {
				t.Errorf("cause %s, want %s (%s)", d.Cause, tc.cause, d.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q lacks %q", d.Message, w)
				}
			}
			if strings.Count(d.Message, ". ") > 0 || strings.ContainsAny(d.Message, "\n") {
				t.Errorf("message %q is more than one sentence", d.Message)
			}
		})
	}
}

func TestDiagnoseFindsNothingInAHealthyLog(t *testing.T) {
	for name, log := range map[string][]string{"vllm": vllmStart, "sglang": sglangStart} {
		if d, ok := Diagnose(log, errors.New("exit status 1")); ok {
			t.Errorf("%s: a healthy start diagnosed as %+v", name, d)
		}
	}
	if d, ok := Diagnose(nil, nil); ok {
		t.Errorf("nothing diagnosed as %+v", d)
	}
}

// FuzzDiagnose: whatever an engine or Docker prints, Diagnose does not
// panic, and what it finds has a cause and a message of one line.
func FuzzDiagnose(f *testing.F) {
	f.Add("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "")
	f.Add("Access to model a/b is restricted", "unsatisfied condition: cuda>=99.99")
	f.Add("max seq len (1), (2 GiB KV cache is needed, which is larger than the available KV cache memory (1 GiB)", "")
	f.Add("Free memory on device cuda:0 (0/0 GiB) on startup is less than desired GPU memory utilization (0.9, 1 GiB)", "")
	f.Add("No space left on device: '", "Bind for :99999999 failed: port is already allocated")
	f.Add("NVIDIA driver on your system is too old (found version 9)", "Repository Not Found for url: https://huggingface.co/")
	f.Fuzz(func(t *testing.T, log, errText string) {
		var err error
		if errText != "" {
			err = errors.New(errText)
		}
		d, ok := Diagnose(strings.Split(log, "\n"), err)
		if ok && (d.Cause == "" || d.Message == "" || strings.Contains(d.Message, "\n") && !strings.Contains(log+errText, "\n")) {
			t.Fatalf("bad diagnosis %+v", d)
		}
	})
}
