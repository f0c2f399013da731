package main

import (
	"context"
	"fmt"
	"net"

	"github.com/hearth-llm/hearth/daemon"
)

// runUp is `hearth up`: the daemon, configured by daemon's flags.
func runUp(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseUpFlags(env, args)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, cfg.LogFormat)
	if cfg.Agent.Client != "" {
		// The layouts are measured in the benchmark's simulation.
		if err := daemon.ChooseAgentLayout(ctx, &cfg, env.layoutEvaluator(), log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("up: listen: %w", err)
	}
	cfg.ProgressOut = env.stderr
	if env.memoryLimit != nil {
		env.memoryLimit(cfg.MemoryLimit(), log)
	}
	return daemon.Run(ctx, cfg, ln, env.stdout, log)
}

// parseUpFlags reads hearth up's configuration as daemon defines it: the
// command line, the HEARTH_* variables and the configuration file, with
// the defaults filled in and checked.
func parseUpFlags(env *environment, args []string) (daemon.Config, error) {
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	cfg := daemon.Config{Version: version}
	if _, err := daemon.RegisterFlags(fs, &cfg, env.upEnv()).Parse(args); err != nil {
		return cfg, err
	}
	if err := cfg.Complete(env.upEnv()); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// upEnv is what hearth up's configuration reads of the environment.
func (env *environment) upEnv() daemon.Env {
	return daemon.Env{Getenv: env.getenv, Stdin: env.stdin, Notes: env.stderr, ConfigFile: env.upConfigFile}
}
