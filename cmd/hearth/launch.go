package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/daemon"
)

// runLaunch starts a coding agent against the running daemon with the
// settings hearth up prints (agentclient), for this run only: it asks the
// daemon's API what it serves, then replaces itself with the client, so
// that the client has the terminal, its signals and its exit status as if
// started by hand.
func runLaunch(ctx context.Context, env *environment, args []string) error {
	const usage = "launch claude|codex|opencode [--addr URL] [--api-key KEY] [--data-dir DIR] [-- client arguments]"
	fs := newFlagSet(env, "launch", usage)
	addr := fs.String("addr", "", "the daemon's address (default: the one the daemon wrote to its data directory, else "+daemon.DefaultAddr+")")
	key := fs.String("api-key", "", "API key, when the API needs one (also $HEARTH_API_KEY)")
	dataDir := fs.String("data-dir", string(daemon.DefaultDataDir(env.getenv)), "the daemon's data directory: its address, and its CA for https")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := fs.Parse(args); err != nil { // --help
			return err
		}
		return fmt.Errorf("%w: name the client: hearth %s", errUsage, usage)
	}
	client, ok := agentclient.ClientByCommand(args[0])
	if !ok {
		return fmt.Errorf("%w: unknown client %q: hearth %s", errUsage, args[0], usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *key == "" {
		*key = env.getenv(agentclient.KeyEnv)
	}
	if *key == "" {
		*key = console.OpenKey
	}
	data := daemon.DataDir(*dataDir)
	base, err := daemon.DaemonAddr(*addr, data)
	if err != nil {
		return err
	}
	served, err := daemon.AskServed(ctx, base, *key, data)
	if err != nil {
		return err
	}
	path, err := exec.LookPath(client.Command)
	if err != nil {
		return fmt.Errorf("%s is not installed (%v); install it with: %s", client.Title, err, client.Install)
	}
	inv := agentclient.InvocationOf(client, served)
	fmt.Fprintf(env.stderr, "hearth: starting %s on %s at %s (%s)\n", client.Title, served.Model(), served.BaseURL, contextNote(served))
	argv := append(append([]string{client.Command}, inv.Args...), fs.Args()...)
	if err := syscall.Exec(path, argv, inv.Environ(os.Environ())); err != nil {
		return fmt.Errorf("starting %s: %w", path, err)
	}
	return nil // not reached: the client runs in this process now
}

// contextNote says what the client is told about the context.
func contextNote(s agentclient.Served) string {
	if s.ContextTokens == 0 {
		return "the daemon did not say its context length"
	}
	return fmt.Sprintf("%d-token context, %d-token output cap", s.ContextTokens, agentclient.OutputTokens(s.ContextTokens))
}
