// Command hearth is the Hearth daemon and its tools: one binary that serves
// coding agents from the GPUs of a workstation or a small LAN.
//
// Run under the name vllm, python3 (or python) or sglang, as the entrypoint
// of an image standing in for vLLM's or SGLang's, it is that engine,
// simulated: `vllm serve MODEL [flags]`, `python3 -m sglang.launch_server
// [flags]`, `sglang serve [MODEL] [flags]` (package runtime/sim/simcli).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/runtime/sim/simcli"
)

// command is one subcommand of the hearth binary.
type command struct {
	name    string
	purpose string // one line, shown by hearth --help
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is what every subcommand gets from main: the process's streams
// and its environment variables, so that commands never read os.* directly
// and tests can run them in-process.
type environment struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// upConfigFile is the configuration file hearth up reads when neither
	// --config nor $HEARTH_CONFIG names one and it exists ("" for none, as
	// in tests, which must not read the machine's).
	upConfigFile string
	// memoryLimit, when set, sets the process's soft memory limit for hearth
	// up (daemon.Config.MemoryLimit); nil in tests, which share a process.
	memoryLimit func(limit int64, log *slog.Logger)
	// layouts evaluates the layouts of hearth plan --agent and hearth up
	// --agent: nil is the full evaluation; tests of their wiring set a
	// small one.
	layouts layoutEvaluator
}

// layoutEvaluator is what hearth plan --agent and hearth up --agent ask of
// the layout evaluation (bench.LayoutEvaluator).
type layoutEvaluator interface {
	catalog.LayoutEvaluator
	Evaluate(ctx context.Context, req catalog.AgentLayoutRequest) (bench.LayoutEvaluation, error)
	WriteRigsPlan(ctx context.Context, w io.Writer, req catalog.AgentLayoutRequest, uses []catalog.GPUUse, rigs int) error
}

// layoutEvaluator is env.layouts, the full evaluation when unset.
func (env *environment) layoutEvaluator() layoutEvaluator {
	if env.layouts == nil {
		return bench.LayoutEvaluator{}
	}
	return env.layouts
}

// commands lists the subcommands in the order --help shows them.
func commands() []command {
	return []command{
		{"up", "serve coding agents: engines, KV-aware router and the OpenAI/Anthropic API", runUp},
		{"launch", "start Claude Code, Codex or OpenCode against the running daemon, with its served context", runLaunch},
		{"config", "print the effective configuration of hearth up and where each value comes from", runConfig},
		{"install", "install Hearth as a systemd service (root): binary, user, config, data directory, unit", runInstall},
		{"upgrade", "replace the installed binary, restart the service, roll back if it is not healthy", runUpgrade},
		{"uninstall", "remove the service and the binary; --purge also the data and the configuration", runUninstall},
		{"version", "print the version", runVersion},
		{"tokenize", "tokenize text or chat conversations read as JSON lines", runTokenize},
		{"bench", "benchmark routing policies on agentic workloads or traces, simulated or live", runBench},
		{"gpus", "list this machine's GPUs as the NVIDIA driver reports them (NVML, else nvidia-smi)", runGPUs},
		{"plan", "show what fits on each GPU: weights, KV cache, memory fraction and context", runPlan},
		{"doctor", "check the host: driver, CUDA, GPU memory, Docker and its NVIDIA runtime, disks, RAM, port", runDoctor},
		{"engines", "list the engines of a running daemon and their states", runEngines},
		{"models", "list the models a running daemon serves on demand, or load, unload, pin or unpin one", runModels},
		{"kvstore", "list the node's SSD KV store, or remove a model's blocks from it", runKVStore},
		{"cluster", "join machines into one cluster: token, status, revoke, leave, requests, accept, reject", runCluster},
		{"node", "drain this node (its sessions move to other nodes; a game can have the GPU) or show its drain", runNode},
		{"logs", "print an engine's last output lines", runLogs},
		{"sim-engine", "run one simulated vLLM or SGLang server (HTTP API, metrics, ZMQ KV events)", runSimEngine},
		{"sim-image", "build the Docker images of the simulated engines (hearth sim-image build)", runSimImage},
	}
}

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	env := &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, upConfigFile: installer.ConfigPath,
		memoryLimit: setMemoryLimit(os.Getenv)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Under a real engine's name (an image's vllm or python3), the binary
	// is that engine, simulated.
	if prog, ok := simcli.Program(os.Args[0]); ok {
		code := simcli.RunProgram(ctx, simEngineEnv(env, ""), prog, os.Args[1:])
		stop()
		os.Exit(code)
	}
	err := run(ctx, env, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(env.stderr, "hearth:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks errors in how the command line was written.
var errUsage = daemon.ErrUsage

// exitStatusError is how a command chooses its exit status (hearth doctor:
// 1 for a failed check, 2 for warnings only). Its message is printed like
// any error's.
type exitStatusError struct {
	status int
	msg    string
}

func (e *exitStatusError) Error() string { return e.msg }

// exitCode is the process's exit status for a command's error: the status
// the command chose, 2 for a bad command line, 1 for any other error.
func exitCode(err error) int {
	var chosen *exitStatusError
	switch {
	case errors.As(err, &chosen):
		return chosen.status
	case errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp):
		return 2
	}
	return 1
}

// run dispatches to the subcommand named by args[0].
func run(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(env.stdout)
		if len(args) == 0 {
			return fmt.Errorf("%w: no command given", errUsage)
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	printUsage(env.stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Hearth serves coding agents from your own NVIDIA GPUs.")
	fmt.Fprintln(w, "\nUsage: hearth <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.purpose)
	}
	fmt.Fprintln(w, "\nRun 'hearth <command> --help' for the flags of a command.")
}

// newFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting, writing help to the environment's stderr.
func newFlagSet(env *environment, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: hearth %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and turns a bad command line into errUsage.
// flagsSet names the flags the command line set.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// newLogger returns the logger every subcommand logs through, in format
// (daemon.LogFormatText or daemon.LogFormatJSON; parsed and checked with
// the flags).
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == daemon.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runVersion(_ context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "version", "version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "hearth", version)
	return nil
}
