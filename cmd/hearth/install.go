package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/installer/config"
)

// runConfig is `hearth config`: every flag of hearth up with the value it
// would take and where that value comes from.
func runConfig(_ context.Context, env *environment, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(env.stderr, "Usage: hearth config [--config FILE] [hearth up flags]\n\nPrints each flag of hearth up as a TOML key with its effective value, and\nits source: default, file, env (a HEARTH_* variable) or flag. Secrets are hidden.")
		return flag.ErrHelp
	}
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	settings, err := daemon.RegisterFlags(fs, &daemon.Config{}, env.upEnv()).Parse(args)
	if err != nil {
		return err
	}
	if settings.File == "" {
		fmt.Fprintln(env.stdout, "# no configuration file")
	} else {
		fmt.Fprintln(env.stdout, "# configuration file:", settings.File)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	for _, s := range settings.Flags {
		values := s.Values
		if daemon.SecretFlag(s.Name) {
			values = make([]string, len(s.Values))
			for i := range values {
				values[i] = "(hidden)"
			}
		}
		line, err := config.Line(fs.Lookup(s.Name), values)
		if err != nil {
			return err
		}
		source := string(s.Source)
		if s.Origin != "" {
			source += " " + s.Origin
		}
		fmt.Fprintf(tw, "%s\t# %s\n", line, source)
	}
	return tw.Flush()
}

// systemFlags are the flags install, uninstall and upgrade share.
type systemFlags struct {
	root   string
	dryRun bool
}

func (s *systemFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&s.root, "root", "", "install into this directory instead of / (packaging, tests); system commands are printed, not run")
	fs.BoolVar(&s.dryRun, "dry-run", false, "print what would be done and change nothing")
}

// installer is the Installer of these flags: under --root every command is
// printed instead of run, since nothing outside the root may change.
func (s *systemFlags) installer(env *environment) (*installer.Installer, error) {
	in := &installer.Installer{Layout: installer.Layout{Root: s.root}, Out: env.stdout, DryRun: s.dryRun, Host: installer.SystemHost{}}
	if s.root != "" {
		in.Host = installer.PrintHost{W: env.stdout}
		return in, nil
	}
	if !s.dryRun && os.Geteuid() != 0 {
		return nil, errors.New("this changes the system: run it as root (sudo), or pass --root DIR or --dry-run")
	}
	return in, nil
}

// runInstall is `hearth install`.
func runInstall(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "install", "install [--root DIR] [--dry-run] [--force] [--no-start] [--binary PATH]")
	var sys systemFlags
	sys.define(fs)
	force := fs.Bool("force", false, "install even when hearth doctor finds a failing check")
	noStart := fs.Bool("no-start", false, "enable the service without starting it")
	binary := fs.String("binary", "", "the hearth binary to install (default: this one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	in, err := sys.installer(env)
	if err != nil {
		return err
	}
	if *binary == "" {
		if *binary, err = os.Executable(); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	config, err := daemon.ConfigTemplate(installer.ServiceConfig())
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	preflight := func(ctx context.Context) error { return installDoctor(ctx, env, in.Layout) }
	if sys.dryRun {
		// The doctor's data directory check creates the directory; a dry
		// run changes nothing.
		fmt.Fprintln(env.stdout, "would run: hearth doctor, and stop with its fixes if a check fails")
		preflight = nil
	}
	return in.Install(ctx, installer.InstallOptions{
		Binary: *binary, Config: config, Force: *force, NoStart: *noStart, Preflight: preflight,
	})
}

// installDoctor runs hearth doctor against what the service will use (the
// data directory under the layout's root: the check writes a file there)
// and fails when a check fails; warnings do not stop an install.
func installDoctor(ctx context.Context, env *environment, layout installer.Layout) error {
	fmt.Fprintln(env.stdout, "Checking the host (hearth doctor):")
	err := runDoctor(ctx, env, []string{"--data-dir", layout.Path(installer.DataDir), "--hf-cache", layout.Path(installer.HFCacheDir)})
	var status *exitStatusError
	if errors.As(err, &status) && status.status == 2 {
		return nil
	}
	return err
}

// runUninstall is `hearth uninstall`.
func runUninstall(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "uninstall", "uninstall [--purge] [--root DIR] [--dry-run]")
	var sys systemFlags
	sys.define(fs)
	purge := fs.Bool("purge", false, "also remove the data directory ("+installer.DataDir+"), the configuration and the service user")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	in, err := sys.installer(env)
	if err != nil {
		return err
	}
	return in.Uninstall(ctx, installer.UninstallOptions{Purge: *purge})
}

// runUpgrade is `hearth upgrade PATH`.
func runUpgrade(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "upgrade", "upgrade [--root DIR] [--dry-run] [--health-timeout 2m] [--health-url URL] PATH")
	var sys systemFlags
	sys.define(fs)
	timeout := fs.Duration("health-timeout", 2*time.Minute, "how long the restarted service has to answer its health check before the old binary is put back")
	healthURL := fs.String("health-url", "", "the URL polled for health (default: /health on the installed configuration's --listen address)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: upgrade takes the new binary's path", errUsage)
	}
	in, err := sys.installer(env)
	if err != nil {
		return err
	}
	url, client := *healthURL, (*http.Client)(nil)
	if url == "" {
		if url, client, err = installedHealth(env, in.Layout); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	return in.Upgrade(ctx, installer.UpgradeOptions{Binary: fs.Arg(0), HealthURL: url, Timeout: *timeout, Client: client})
}

// installedHealth is the health URL of the installed service, GET
// /health on the address its configuration gives --listen (loopback for
// an unspecified one), and the client to poll it with: over HTTPS when the
// configuration serves TLS, trusting Hearth's own CA (--tls auto) or the
// configured certificate's chain.
func installedHealth(env *environment, layout installer.Layout) (string, *http.Client, error) {
	// The service's environment, not this shell's: the unit sets no
	// HEARTH_* variables.
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	var cfg daemon.Config
	if _, err := daemon.RegisterFlags(fs, &cfg, daemon.Env{Notes: env.stderr}).Parse([]string{"--config", layout.Path(installer.ConfigPath)}); err != nil {
		return "", nil, err
	}
	return cfg.LocalHealth(layout.Path)
}
