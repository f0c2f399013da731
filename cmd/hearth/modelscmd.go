package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
)

// modelActions are what hearth models does to one model.
var modelActions = []string{"load", "unload", "pin", "unpin"}

// runModels lists the models a running daemon serves on demand, or loads,
// unloads, pins or unpins one: hearth models [load|unload|pin|unpin NAME].
func runModels(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "models", "models [load|unload|pin|unpin MODEL] [--addr URL] [--json] [--data-dir DIR]")
	running := registerDaemonFlags(fs, env.getenv)
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	action, name := "", ""
	if len(args) > 0 && slices.Contains(modelActions, args[0]) {
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return fmt.Errorf("%w: hearth models %s needs the model's name", errUsage, args[0])
		}
		action, name, args = args[0], args[1], args[2:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if action != "" {
		o, err := askDaemon(ctx, env, running, func(c *adminapi.Client, ctx context.Context) (adminapi.Outcome, error) {
			return c.ModelAction(ctx, name, action)
		})
		return printOutcome(env.stdout, o, err)
	}
	list, err := askDaemon(ctx, env, running, (*adminapi.Client).Models)
	if *asJSON && list.Raw != nil {
		return printAsItCame(env.stdout, list.Raw)
	}
	if err != nil {
		return err
	}
	return daemon.WriteModelTable(env.stdout, list.Models)
}
