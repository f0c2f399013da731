package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
)

// The commands that ask a running daemon (engines, logs, cluster status
// and the cluster operations) do it through adminapi's client.

// daemonFlags are the flags of every command that asks a running daemon.
type daemonFlags struct {
	addr, key, dataDir *string
}

func registerDaemonFlags(fs *flag.FlagSet, getenv func(string) string) daemonFlags {
	return daemonFlags{
		addr:    fs.String("addr", "http://127.0.0.1:8000", "the daemon's address"),
		key:     fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)"),
		dataDir: fs.String("data-dir", string(daemon.DefaultDataDir(getenv)), "where Hearth keeps its state; an https daemon's certificate may come from its CA there (tls/ca.pem, hearth up --tls auto)"),
	}
}

// client is the daemon's client (daemon.AdminClient): the key from
// --api-key or $HEARTH_API_KEY.
func (f daemonFlags) client(env *environment) (*adminapi.Client, error) {
	key := *f.key
	if key == "" {
		key = env.getenv("HEARTH_API_KEY")
	}
	return daemon.AdminClient(*f.addr, key, daemon.DataDir(*f.dataDir))
}

// explain words an error of the daemon's client for the command line.
func (f daemonFlags) explain(err error) error {
	var answer *adminapi.Error
	var unreached *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &answer):
		switch answer.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("%w (pass an admin API key with --api-key or $HEARTH_API_KEY)", err)
		case http.StatusForbidden:
			// A change without a key needs the daemon's local token: the
			// daemon's user, with its --data-dir, can read it.
			return fmt.Errorf("%w (pass an admin API key with --api-key or $HEARTH_API_KEY, or, on the daemon's machine, run as its user with its --data-dir, whose local-token file proves the request is yours)", err)
		}
		return err
	case errors.As(err, &unreached):
		return fmt.Errorf("is hearth up running at %s? %w", *f.addr, err)
	}
	return err
}

// runEngines prints the engines of a running daemon.
func runEngines(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "engines", "engines [--addr URL] [--json] [--data-dir DIR]")
	running := registerDaemonFlags(fs, env.getenv)
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	list, err := askDaemon(ctx, env, running, (*adminapi.Client).Engines)
	if *asJSON && list.Raw != nil {
		return printAsItCame(env.stdout, list.Raw)
	}
	if err != nil {
		return err
	}
	return daemon.WriteEngineTable(env.stdout, list.Engines)
}

// runLogs prints an engine's last output lines and, with -f, the lines
// that follow until interrupted, as tail -f does.
func runLogs(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "logs", "logs ENGINE [-f] [--addr URL] [--data-dir DIR]")
	daemon := registerDaemonFlags(fs, env.getenv)
	var follow bool
	fs.BoolVar(&follow, "f", false, "keep printing new lines as the engine writes them")
	fs.BoolVar(&follow, "follow", false, "the same as -f")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: name the engine (hearth engines lists them)", errUsage)
	}
	c, err := daemon.client(env)
	if err != nil {
		return err
	}
	if follow {
		err := c.FollowLogs(ctx, name, func(ev adminapi.LogEvent) {
			if ev.Restart {
				fmt.Fprintln(env.stdout, "-- the engine was launched again --")
				return
			}
			fmt.Fprintln(env.stdout, ev.Line)
		})
		if ctx.Err() != nil {
			return nil // interrupted: the way a follow ends
		}
		return daemon.explain(err)
	}
	text, err := c.Logs(ctx, name)
	if err != nil {
		return daemon.explain(err)
	}
	_, err = fmt.Fprint(env.stdout, text)
	return err
}

// askDaemon makes the daemon's client and asks it once, with the error
// worded for the command line.
func askDaemon[T any](ctx context.Context, env *environment, daemon daemonFlags, ask func(*adminapi.Client, context.Context) (T, error)) (T, error) {
	c, err := daemon.client(env)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := ask(c, ctx)
	return v, daemon.explain(err)
}

// printAsItCame prints the daemon's JSON for --json: whenever the daemon
// answered 200, whether or not its answer decoded.
func printAsItCame(w io.Writer, raw []byte) error {
	_, err := w.Write(raw)
	return err
}

// printOutcome prints the daemon's answer to a cluster operation as it
// came.
func printOutcome(w io.Writer, o adminapi.Outcome, err error) error {
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, strings.TrimSpace(string(o.Raw)))
	return err
}
