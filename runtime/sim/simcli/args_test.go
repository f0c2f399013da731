package simcli

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// parseEngine parses an engine command line as runEngineProgram does,
// argv[0]'s base name first.
func parseEngine(t *testing.T, argv []string, env map[string]string) (*engineCommand, error) {
	t.Helper()
	var c *engineCommand
	var err error
	switch {
	case argv[0] == "vllm" && len(argv) > 1 && argv[1] == "serve":
		c, err = parseVLLMServe(argv[2:])
	case argv[0] == "python3" && len(argv) > 2 && argv[1] == "-m" && argv[2] == "sglang.launch_server":
		c, err = parseSGLangServer(argv[3:], false)
	case argv[0] == "sglang" && len(argv) > 1 && argv[1] == "serve":
		c, err = parseSGLangServer(argv[2:], true)
	default:
		t.Fatalf("not an engine command line: %q", argv)
	}
	if err != nil {
		return c, err
	}
	return c, c.finish(func(k string) string { return env[k] })
}

// TestEngineArgsRoundTrip: whatever runtime.EngineArgs gives the real
// engines, the simulated ones parse into the configuration the spec asks
// for; what the command line cannot say comes from the environment.
func TestEngineArgsRoundTrip(t *testing.T) {
	ports := hruntime.Ports{Host: "0.0.0.0", HTTP: 8123, KVEvents: 5601, Replay: 5602}
	env := map[string]string{hruntime.EnvSimGPU: "h100", hruntime.EnvSimSpeedup: "25", hruntime.EnvSimSeed: "42", hruntime.EnvSimNumGPUBlocks: "3000",
		hruntime.EnvSimToolCalls: "2-4", hruntime.EnvSimWriting: "1", hruntime.EnvSimEngineVersion: "0.20.0",
		hruntime.EnvSimMemAvailableGiB: "48.5"}
	rope := `{"max_position_embeddings":131072,"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768}}`
	base := hruntime.Spec{
		Name: "gpu0", Model: "qwen3-14b-fp8", ModelPath: "Qwen/Qwen3-14B-FP8",
		GPU:            hruntime.GPU{Kind: "h100"},
		TensorParallel: []hruntime.GPU{{Index: 1, Kind: "h100"}},
		MaxModelLen:    16384, GPUMemoryUtilization: 0.85, KVOffloadingGiB: 8,
		KVCacheDtype: "fp8", ModelOverrides: rope,
		Speedup: 25, Seed: 42, NumGPUBlocks: 3000,
	}
	tests := []struct {
		kind    hruntime.Kind
		flavor  hruntime.Kind
		offload float64 // GiB of host tier the engine ends up with
		dtype   string  // the KV cache dtype as the engine spells it
	}{
		{hruntime.KindVLLM, hruntime.KindVLLM, 8, "fp8"},                            // --kv-offloading-size is GiB
		{hruntime.KindSGLang, hruntime.KindSGLang, 2 * 4e9 / (1 << 30), "fp8_e4m3"}, // --hicache-size is GB per rank: 8 GiB are 4 GB on each of 2; no bare fp8
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			spec := base
			spec.Engine = tc.kind
			argv := hruntime.EngineArgs(spec, ports, "/usr/local/bin/hearth")
			c, err := parseEngine(t, argv, env)
			if err != nil {
				t.Fatalf("%q: %v", argv, err)
			}
			want := sim.Config{
				GPU: "h100", Model: "qwen3-14b-fp8", NumGPUBlocks: 3000, BlockSize: tokenizer.DefaultBlockSize,
				MaxModelLen: 16384, GPUMemoryUtilization: 0.85, CPUOffloadGiB: tc.offload, Seed: 42, Kind: tc.flavor,
				TP: 2, KVCacheDtype: tc.dtype, ModelOverrides: rope,
				Agent:            sim.AgentOptions{AllowWriteTools: true, MinToolCalls: 2, MaxToolCalls: 4},
				SchedulingPolicy: sim.PolicyPriority, PriorityHigherFirst: tc.kind == hruntime.KindSGLang,
			}
			if c.cfg != want {
				t.Errorf("config\n got %+v\nwant %+v", c.cfg, want)
			}
			if c.flavor != tc.flavor || c.listen() != "0.0.0.0:8123" || c.served != "qwen3-14b-fp8" ||
				c.modelPath != "Qwen/Qwen3-14B-FP8" || c.speedup != 25 {
				t.Errorf("flavor %v, listen %s, served %s, model path %s, speedup %v", c.flavor, c.listen(), c.served,
					c.modelPath, c.speedup)
			}
			if c.engineVersion != "0.20.0" {
				t.Errorf("engine version %q, want the environment's 0.20.0", c.engineVersion)
			}
			if c.memAvailable != 97<<29 {
				t.Errorf("host memory available %d, want the environment's 48.5 GiB", c.memAvailable)
			}
			if c.kvEvents != "tcp://*:5601" || c.kvReplay != "tcp://*:5602" || c.topic != hruntime.KVEventsTopic {
				t.Errorf("KV events %s, replay %s, topic %s", c.kvEvents, c.kvReplay, c.topic)
			}
			if err := c.cfg.Validate(); err != nil {
				t.Errorf("the parsed config does not validate: %v", err)
			}
		})
	}
}

func TestEngineCommandDefaults(t *testing.T) {
	tests := []struct {
		argv             []string
		listen, kvEvents string
		blockSize        int
	}{
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B"}, "0.0.0.0:8000", "", 0},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"}, "127.0.0.1:30000", "", 1},
		{[]string{"sglang", "serve", "qwen3-8b"}, "127.0.0.1:30000", "", 1},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--kv-events-config", `{"enable_kv_cache_events":true}`},
			"0.0.0.0:8000", "tcp://*:5557", 0},
		{[]string{"python3", "-m", "sglang.launch_server", "--model", "/models/Qwen3-8B", "--kv-events-config", `{"publisher":"zmq"}`},
			"127.0.0.1:30000", "tcp://*:5557", 1},
		// Events configured but not switched on publish nothing.
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--kv-events-config", `{"publisher":"zmq","endpoint":"tcp://*:1"}`},
			"0.0.0.0:8000", "", 0},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--kv-events-config", `{"endpoint":"tcp://*:1"}`},
			"127.0.0.1:30000", "", 1},
	}
	for _, tc := range tests {
		c, err := parseEngine(t, tc.argv, nil)
		if err != nil {
			t.Errorf("%q: %v", tc.argv, err)
			continue
		}
		if c.listen() != tc.listen || c.kvEvents != tc.kvEvents || c.cfg.BlockSize != tc.blockSize ||
			c.cfg.GPU != "rtx4090" || c.speedup != 1 || c.served != c.modelPath || c.cfg.Model != "qwen3-8b" {
			t.Errorf("%q: listen %s, events %q, block size %d, gpu %s, speedup %v, served %s",
				tc.argv, c.listen(), c.kvEvents, c.cfg.BlockSize, c.cfg.GPU, c.speedup, c.served)
		}
	}
}

// TestEngineFlagsAccepted: real flags the simulator does not model are
// accepted, in both spellings argparse allows; the simulator's own flags
// take effect.
func TestEngineFlagsAccepted(t *testing.T) {
	vllm := []string{"vllm", "serve", "--port=9000", "Qwen/Qwen3-8B", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
		"--reasoning-parser", "qwen3", "--trust-remote-code", "--kv-offloading-backend", "native", "--dtype=auto",
		"--max_model_len", "32k", "--served-model-name", "a", "b", "--simulate-startup", "1.5", "--simulate-failure", "oom",
		"--no-enable-prefix-caching", "-tp", "1", "--max-num-seqs", "64", "--scheduling-policy", "priority", "--enable-sleep-mode"}
	c, err := parseEngine(t, vllm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.port != 9000 || c.cfg.MaxModelLen != 32000 || c.served != "a" || c.startupDelay != 1500*time.Millisecond ||
		c.failure != sim.FailureOOM || c.cfg.MaxNumSeqs != 64 || c.cfg.SchedulingPolicy != sim.PolicyPriority || !c.sleepMode {
		t.Errorf("vllm: %+v", c)
	}
	sglang := []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-metrics",
		"--tool-call-parser", "qwen25", "--reasoning-parser", "qwen3", "--trust-remote-code", "--tp", "1",
		"--enable-hierarchical-cache", "--hicache-ratio", "1.5", "--hicache-write-policy", "write_through",
		"--simulate-startup", "250ms", "--simulate-failure=exit", "--context-length", "8K", "--max-running-requests", "32",
		"--chunked-prefill-size", "4096", "--enable-priority-scheduling", "--schedule-policy", "priority",
		"--enable-memory-saver", "--enable-weights-cpu-backup", "--enable-kv-events-component-types"}
	c, err = parseEngine(t, sglang, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.startupDelay != 250*time.Millisecond || c.failure != sim.FailureExit || c.cfg.MaxModelLen != 8192 || !c.sleepMode || !c.weightsBackup ||
		c.cfg.MaxNumSeqs != 32 || c.cfg.MaxNumBatchedTokens != 4096 || c.cfg.SchedulingPolicy != sim.PolicyPriority ||
		c.cfg.NumCPUBlocks == 0 || c.serverArgs["tool_call_parser"] != "qwen25" || !c.kvComponentTypes {
		t.Errorf("sglang: %+v", c)
	}
}

// TestEngineCommandLineErrors: what the engines' argparse refuses is a
// usage error (exit 2), worded as argparse words it.
func TestEngineCommandLineErrors(t *testing.T) {
	tests := []struct {
		argv []string
		msg  string
	}{
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--frobnicate"}, "unrecognized arguments: --frobnicate"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "extra"}, "unrecognized arguments: extra"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--enable-metrics"}, "unrecognized arguments: --enable-metrics"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--port", "eighty"}, "argument --port: invalid int value: 'eighty'"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--port"}, "argument --port: expected one argument"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--kv-events-config", "{not json"}, "argument --kv-events-config"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--simulate-failure", "segfault"}, "invalid choice: 'segfault'"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--simulate-startup", "soon"}, "invalid duration value"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--trust-remote-code=yes"}, "ignored explicit argument 'yes'"},
		{[]string{"python3", "-m", "sglang.launch_server"}, "the following arguments are required: --model-path/--model"},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "Qwen/Qwen3-8B"}, "unrecognized arguments"},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "x", "--block-size", "16"}, "unrecognized arguments: --block-size 16"},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "x", "--kv-events-config", `{"publisher":"kafka"}`},
			"unknown event publisher 'kafka'"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", "int8"}, "argument --kv-cache-dtype: invalid choice: 'int8'"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "-tp", "two"}, "invalid int value: 'two'"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "0"}, "must be at least 1"},
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--hf-overrides", "{rope"}, "argument --hf-overrides"},
		// SGLang has no bare fp8 among its choices.
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "x", "--kv-cache-dtype", "fp8"},
			"argument --kv-cache-dtype: invalid choice: 'fp8'"},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "x", "--json-model-override-args", `{"rope_scaling":{"factor":-1}}`},
			"factor must be a positive number"},
		// SGLang's server_args.py: parser.add_argument("--hicache-size", type=int, ...).
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "x", "--hicache-size", "12.5"},
			"argument --hicache-size: invalid int value: '12.5'"},
	}
	for _, tc := range tests {
		_, err := parseEngine(t, tc.argv, nil)
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "usage: ") {
			t.Errorf("%q: %v, want a usage error with %q", tc.argv, err, tc.msg)
		}
	}
}

func TestEngineCommandEnvironmentAndModel(t *testing.T) {
	argv := []string{"vllm", "serve", "Qwen/Qwen3-8B"}
	for _, env := range []map[string]string{
		{hruntime.EnvSimSpeedup: "0"}, {hruntime.EnvSimSpeedup: "fast"}, {hruntime.EnvSimSeed: "x"}, {hruntime.EnvSimNumGPUBlocks: "-1"},
		{hruntime.EnvSimToolCalls: "5-2"}, {hruntime.EnvSimToolCalls: "many"}, {hruntime.EnvSimWriting: "maybe"},
		{hruntime.EnvSimMemAvailableGiB: "0"}, {hruntime.EnvSimMemAvailableGiB: "lots"}, {hruntime.EnvSimMemAvailableGiB: "-8"},
	} {
		if _, err := parseEngine(t, argv, env); err == nil || errors.Is(err, errUnknownModel) {
			t.Errorf("env %v: %v, want an error", env, err)
		}
	}
	if _, err := parseEngine(t, []string{"vllm", "serve", "meta-llama/Llama-3.1-8B"}, nil); !errors.Is(err, errUnknownModel) {
		t.Errorf("unknown model: %v", err)
	}
	for _, path := range []string{"qwen3-8b", "QWEN/qwen3-8B", "/root/.cache/models/Qwen3-8B/"} {
		c, err := parseEngine(t, []string{"vllm", "serve", path}, nil)
		if err != nil || c.cfg.Model != "qwen3-8b" {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func FuzzEngineCommandLine(f *testing.F) {
	f.Add("serve\x00Qwen/Qwen3-8B\x00--port\x008000")
	f.Add("-m\x00sglang.launch_server\x00--model-path\x00x\x00--kv-events-config\x00{\"publisher\":\"zmq\"}")
	f.Add("serve\x00--served-model-name\x00a\x00b\x00--max_model_len=4k\x00--\x00-3")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		for _, parse := range []func([]string) (*engineCommand, error){
			parseVLLMServe,
			func(a []string) (*engineCommand, error) { return parseSGLangServer(a, true) },
		} {
			c, err := parse(args)
			if err == nil && !c.help {
				_ = c.finish(func(string) string { return "" })
			}
		}
	})
}

// SGLang serves higher priority values first unless
// --schedule-low-priority-values-first; vLLM lower ones first.
func TestPriorityOrderFlags(t *testing.T) {
	for _, tc := range []struct {
		argv        []string
		policy      string
		higherFirst bool
	}{
		{[]string{"vllm", "serve", "Qwen/Qwen3-8B", "--scheduling-policy", "priority"}, sim.PolicyPriority, false},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-priority-scheduling"}, sim.PolicyPriority, true},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-priority-scheduling", "--schedule-low-priority-values-first"}, sim.PolicyPriority, false},
	} {
		c, err := parseEngine(t, tc.argv, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.argv, err)
		}
		if c.cfg.SchedulingPolicy != tc.policy || c.cfg.PriorityHigherFirst != tc.higherFirst {
			t.Errorf("%q: policy %q higher first %v, want %q %v", tc.argv, c.cfg.SchedulingPolicy, c.cfg.PriorityHigherFirst, tc.policy, tc.higherFirst)
		}
	}
}

// TestSGLangHostMemoryGuard: the simulated SGLang refuses a HiCache host
// pool as SGLang's HostKVCache does: each rank's --hicache-size GB must fit
// MemAvailable less 10 GiB, the ranks taking theirs one after another;
// vLLM, and SGLang without --hicache-size, are not weighed.
func TestSGLangHostMemoryGuard(t *testing.T) {
	sglang := func(gb, tp int) []string {
		return []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
			"--tp-size", strconv.Itoa(tp), "--enable-hierarchical-cache", "--hicache-size", strconv.Itoa(gb)}
	}
	tests := []struct {
		name      string
		argv      []string
		available uint64
		refused   string // "" for accepted
	}{
		// 17 GiB less 10 GiB is 7.52 GB: one rank's 4 GB fits.
		{"one rank fits", sglang(4, 1), 17 << 30, ""},
		// The second rank finds 7.52 - 4 = 3.52 GB free.
		{"second rank does not", sglang(4, 2), 17 << 30, "Requesting 4.00 GB but only have 3.52 GB free"},
		// 20 GiB: 21.47 - 10.74 - 4 = 6.74 GB for the second.
		{"both ranks fit", sglang(4, 2), 20 << 30, ""},
		{"under the reserve", sglang(1, 1), 10 << 30, "Requesting 1.00 GB but only have 0.00 GB free"},
		{"no hicache size", []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
			"--enable-hierarchical-cache"}, 1 << 30, ""},
		{"vllm", []string{"vllm", "serve", "Qwen/Qwen3-8B", "--kv-offloading-size", "64", "--kv-offloading-backend", "native"}, 1 << 30, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseEngine(t, tc.argv, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.memAvailable = tc.available
			err = c.checkHostMemory()
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), "Not enough host memory available. "+tc.refused)):
				t.Errorf("error %v, want one saying %q", err, tc.refused)
			}
		})
	}
}
