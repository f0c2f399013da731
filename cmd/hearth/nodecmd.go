package main

import (
	"context"
	"fmt"

	"github.com/hearth-llm/hearth/adminapi"
)

// runNode is hearth node drain [--undo] | status: this node's drain, asked
// of the running daemon.
func runNode(ctx context.Context, env *environment, args []string) error {
	usage := "node drain [--undo] [--addr URL] [--data-dir DIR] | status [--addr URL] [--json]"
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "Usage: hearth "+usage)
		return fmt.Errorf("%w: node: no subcommand", errUsage)
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet(env, "node "+sub, usage)
	running := registerDaemonFlags(fs, env.getenv)
	undo := fs.Bool("undo", false, "drain: end the drain by hand (a drain for a GPU another program holds lasts until it frees it)")
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	var d adminapi.NodeDrain
	var err error
	switch sub {
	case "drain":
		d, err = askDaemon(ctx, env, running, func(c *adminapi.Client, ctx context.Context) (adminapi.NodeDrain, error) {
			return c.Drain(ctx, *undo)
		})
	case "status":
		d, err = askDaemon(ctx, env, running, (*adminapi.Client).NodeDrain)
	default:
		return fmt.Errorf("%w: node: unknown subcommand %q", errUsage, sub)
	}
	if *asJSON && d.Raw != nil {
		return printAsItCame(env.stdout, d.Raw)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, d.Text)
	if d.TakenBy != "" {
		fmt.Fprintln(env.stdout, d.TakenBy)
	}
	if sub == "drain" && *undo && d.GPUTaken {
		fmt.Fprintln(env.stderr, "the node stays drained until the other program frees the GPU")
	}
	return nil
}
