package simcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// The hearth binary answers to the real engines' names, so that an image
// holding it as /usr/local/bin/vllm or /usr/bin/python3 behaves like the
// vLLM or SGLang image it stands in for: `vllm serve MODEL [flags]`,
// `python3 -m sglang.launch_server [flags]`, `sglang serve [MODEL] [flags]`.

// Env is what an engine program gets from the process that runs it.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// OpenStore opens the node's SSD KV store in dir and returns the
	// engine's part of it (sim.NodeStore) and what closes the store; the
	// caller supplies it, as the store is not the simulator's. Only
	// `hearth sim-engine` (Serve) uses it: an engine run under a real
	// engine's name writes its file tier in that engine's own layout, as
	// SGLang's HiCacheFile does (sim.SGLangFileStore).
	OpenStore func(dir string, cfg sim.Config, log *slog.Logger) (sim.NodeStore, io.Closer, error)
}

// Program reports whether the binary runs under a real engine's name (the
// base name of argv[0]), and which.
func Program(argv0 string) (string, bool) {
	switch name := filepath.Base(argv0); name {
	case "vllm", "python3", "python", "sglang":
		return name, true
	}
	return "", false
}

// RunProgram runs the simulated engine a real engine's command line
// describes and returns the process's exit status: 0 after a clean stop, 1
// when the engine fails, 2 for a command line the engine refuses.
func RunProgram(ctx context.Context, env Env, prog string, args []string) int {
	var cmd *engineCommand
	var err error
	switch prog {
	case "vllm":
		switch {
		case len(args) > 0 && (args[0] == "--version" || args[0] == "-v"):
			fmt.Fprintln(env.Stdout, vllmVersionString)
			return 0
		case len(args) == 0 || args[0] != "serve":
			fmt.Fprintln(env.Stderr, "usage: vllm [-h] [-v] {serve} ...")
			if len(args) == 0 {
				fmt.Fprintln(env.Stderr, "vllm: error: the following arguments are required: subparser")
			} else {
				fmt.Fprintf(env.Stderr, "vllm: error: argument subparser: invalid choice: '%s' (the simulated vllm has: 'serve')\n", args[0])
			}
			return 2
		}
		cmd, err = parseVLLMServe(args[1:])
	case "sglang":
		if len(args) == 0 || args[0] != "serve" {
			fmt.Fprintln(env.Stderr, "usage: sglang [-h] {serve} ...")
			fmt.Fprintln(env.Stderr, "sglang: error: the simulated sglang has one command: serve")
			return 2
		}
		cmd, err = parseSGLangServer(args[1:], true)
	default: // python3, python
		switch {
		case len(args) >= 2 && args[0] == "-m" && args[1] == "sglang.launch_server":
			cmd, err = parseSGLangServer(args[2:], false)
		case len(args) >= 2 && args[0] == "-m":
			fmt.Fprintf(env.Stderr, "/usr/bin/%s: No module named %s\n", prog, args[1])
			return 1
		default:
			fmt.Fprintf(env.Stderr, "%s: this is a simulated interpreter; it only runs -m sglang.launch_server\n", prog)
			return 2
		}
	}
	var usage *usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(env.Stderr, usage.Error())
		return 2
	case err != nil:
		fmt.Fprintln(env.Stderr, err)
		return 2
	case cmd.help:
		fmt.Fprintf(env.Stdout, "usage: %s\n\nA simulated %s server (Hearth). Options it models: %s\n",
			map[hruntime.Kind]string{hruntime.KindVLLM: vllmUsage, hruntime.KindSGLang: sglangUsage}[cmd.flavor], cmd.flavor,
			strings.Join(modelledOptions(cmd.flavor), " "))
		return 0
	}
	// The engine's own lines go where it writes them: vLLM's logger to
	// stdout, SGLang's to stderr.
	out := env.Stderr
	if cmd.flavor == hruntime.KindVLLM {
		out = env.Stdout
	}
	if err := cmd.finish(env.Getenv); err != nil {
		if errors.Is(err, errUnknownModel) {
			printUnknownModel(out, cmd)
		} else {
			fmt.Fprintln(env.Stderr, "error:", err)
		}
		return 1
	}
	if err := cmd.cfg.Validate(); err != nil {
		fmt.Fprintf(out, "ValueError: %v\n", err)
		return 1
	}
	if err := cmd.checkHostMemory(); err != nil {
		fmt.Fprintf(out, "ValueError: %v\n", err)
		return 1
	}
	// The model's own tokenizer, from the Hugging Face cache the engine
	// reads, as the real engine loads it.
	tok, err := catalog.LoadTokenizer(cmd.modelPath, catalog.HFCacheDir(env.Getenv))
	if err != nil {
		fmt.Fprintf(out, "OSError: %v\n", err)
		return 1
	}
	if cmd.storeDir != "" {
		// SGLang's file backend writes its own layout (HiCacheFile).
		files, err := sim.NewSGLangFileStore(cmd.storeDir, cmp.Or(cmd.served, cmd.modelPath))
		if err != nil {
			fmt.Fprintf(out, "OSError: %v\n", err)
			return 1
		}
		cmd.cfg.Store = files
	}
	inst, err := sim.NewInstance(sim.InstanceOptions{
		Engine: cmd.cfg, Listen: cmd.listen(), KVEvents: cmd.kvEvents, KVReplay: cmd.kvReplay, Topic: cmd.topic,
		ServedModelName: cmd.served, ModelPath: cmd.modelPath, Speedup: cmd.speedup,
		StartupDelay: cmd.startupDelay, Failure: cmd.failure, Console: out, ServerArgs: cmd.serverArgs,
		HealthCheckTimeout: cmd.healthTimeout, Tokenizer: tok, EngineVersion: cmd.engineVersion,
		KVEventFault: cmd.kvEventFault, KVEventComponentTypes: cmd.kvComponentTypes,
		SleepMode: cmd.sleepMode, WeightsBackup: cmd.weightsBackup,
		// Only trouble goes to the log; the engine's lines are its output.
		Logger: warnLogger(env.Stderr),
	})
	if err != nil {
		fmt.Fprintf(out, "OSError: %v\n", err)
		return 1
	}
	if err := inst.Run(ctx); err != nil {
		if !errors.Is(err, sim.ErrStartupFailed) {
			fmt.Fprintln(env.Stderr, "error:", err)
		}
		return 1
	}
	return 0
}

const vllmVersionString = "0.11.0"

// modelledOptions names the options the flavour's simulator acts on.
func modelledOptions(f hruntime.Kind) []string {
	flags := vllmFlags()
	if f == hruntime.KindSGLang {
		flags = sglangFlags()
	}
	var out []string
	for _, fl := range flags {
		if fl.set != nil {
			out = append(out, fl.names[0])
		}
	}
	return out
}

// printUnknownModel writes what the engines print when Hugging Face has no
// such model, and what the simulator knows.
func printUnknownModel(w io.Writer, c *engineCommand) {
	fmt.Fprintln(w, "Traceback (most recent call last):")
	fmt.Fprintln(w, `  File "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py", line 479, in cached_files`)
	fmt.Fprintf(w, "OSError: %s is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'\n",
		c.modelPath)
	fmt.Fprintln(w, "If this is a private repository, make sure to pass a token having permission to this repo either by "+
		"logging in with `hf auth login` or by passing `token=<your_token>`")
	fmt.Fprintf(w, "(simulated %s: the models it can serve are %s)\n", c.flavor, strings.Join(sim.ModelNames(), ", "))
}

// warnLogger logs trouble alone, as text.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openStore opens the node store through env.OpenStore.
func openStore(env Env, dir string, cfg sim.Config, log *slog.Logger) (sim.NodeStore, io.Closer, error) {
	if env.OpenStore == nil {
		return nil, nil, fmt.Errorf("no node KV store in this build to open %s", dir)
	}
	return env.OpenStore(dir, cfg, log)
}

// Serve runs the simulated engine `hearth sim-engine` describes until ctx
// ends: opts with the tokenizer and, when storeDir is set, the engine's
// part of the node store added. opts.Logger must be set.
func Serve(ctx context.Context, env Env, storeDir string, opts sim.InstanceOptions) error {
	log := opts.Logger
	if storeDir != "" {
		space, st, err := openStore(env, storeDir, opts.Engine, log)
		if err != nil {
			return fmt.Errorf("sim-engine: %w", err)
		}
		defer st.Close()
		opts.Engine.Store = space
	}
	tok, err := catalog.LoadTokenizer(opts.Engine.Model, catalog.HFCacheDir(env.Getenv))
	if err != nil {
		return fmt.Errorf("sim-engine: %w", err)
	}
	opts.Tokenizer = tok
	inst, err := sim.NewInstance(opts)
	if err != nil {
		return fmt.Errorf("sim-engine: %w", err)
	}
	err = inst.Run(ctx)
	log.Info("stopped")
	return err
}
