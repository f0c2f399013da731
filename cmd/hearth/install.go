package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/installer/config"
	"github.com/hearth-llm/hearth/tlsca"
)

// configEnv names the configuration file of hearth up, like --config.
const configEnv = "HEARTH_CONFIG"

// upInspector receives the flags of hearth up once the command line, the
// environment and the configuration file have given them their values,
// with the file that was read ("" for none) and every flag's Setting.
type upInspector func(fs *flag.FlagSet, file string, settings []config.Setting) error

// upConfigFlags is parseUpFlags' parsing: it adds --config, parses the
// command line, then fills the flags it left unset from the HEARTH_*
// variables and the configuration file (--config, else $HEARTH_CONFIG,
// else the environment's upConfigFile when it exists). With an inspector
// in the environment, the inspector's answer ends the parse.
func upConfigFlags(env *environment, fs *flag.FlagSet, args []string) error {
	file := fs.String("config", "", "TOML file of hearth up's flags, one key per flag (default: "+installer.ConfigPath+" when it exists; also $"+configEnv+"); flags and HEARTH_* variables override it")
	config.TrackValues(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	path, required := *file, true
	if path == "" {
		path = env.getenv(configEnv)
	}
	if path == "" {
		path, required = env.upConfigFile, false
	}
	settings, err := config.Apply(fs, config.Sources{
		File: path, Required: required, Getenv: env.getenv,
		// HEARTH_API_KEY is the key clients send; the server's keys
		// have their own variable (serverKeysEnv).
		NoEnv: []string{"api-key"},
		Skip:  []string{"config"},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := simOverridesFileEngine(fs, settings, env.stderr); err != nil {
		return err
	}
	if env.inspectUp != nil {
		addServerKeys(settings, env.getenv(daemon.ServerKeysEnv))
		if _, statErr := os.Stat(path); statErr != nil {
			path = ""
		}
		return env.inspectUp(fs, path, settings)
	}
	return nil
}

// realGPUKeys are what the installed configuration file sets for real
// GPUs served from containers (installer.ServiceConfig), and what hearth
// up refuses next to simulated GPUs in the daemon.
var realGPUKeys = []string{"engine", "keep-engines"}

// simOverridesFileEngine lets sim, set anywhere, run simulated GPUs in the
// daemon although the configuration file chooses an engine and keeps its
// containers: those values from the file are for real GPUs, and give way
// (said on w) unless the engine runtime is set too, which asks for the
// simulated images and takes them. Set on the command line or in the
// environment, they still meet hearth up's checks.
func simOverridesFileEngine(fs *flag.FlagSet, settings []config.Setting, w io.Writer) error {
	byName := map[string]*config.Setting{}
	for i := range settings {
		byName[settings[i].Name] = &settings[i]
	}
	sim, runtime := byName["sim"], byName["engine-runtime"]
	if sim == nil || runtime == nil || sim.Source == config.SourceDefault || slices.Equal(sim.Values, []string{""}) ||
		runtime.Source != config.SourceDefault {
		return nil
	}
	for _, name := range realGPUKeys {
		s, f := byName[name], fs.Lookup(name)
		if s == nil || f == nil || s.Source != config.SourceFile {
			continue
		}
		if err := f.Value.Set(f.DefValue); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(w, "hearth up: sim is set, so %s = %s from %s (for real GPUs) is not used; engine-runtime = \"docker\" would run the simulated images with it\n",
			name, strings.Join(s.Values, ","), s.Origin)
		s.Values, s.Source, s.Origin = []string{f.DefValue}, config.SourceDefault, "(the file's value is for real GPUs)"
	}
	return nil
}

// addServerKeys shows in api-key's setting the keys parseUpFlags adds
// from $HEARTH_SERVER_API_KEYS, which config.Apply does not read.
func addServerKeys(settings []config.Setting, keys string) {
	for i := range settings {
		s := &settings[i]
		if s.Name != "api-key" {
			continue
		}
		added := false
		for _, k := range strings.Split(keys, ",") {
			if k = strings.TrimSpace(k); k != "" {
				s.Values, added = append(s.Values, k), true
			}
		}
		switch {
		case !added:
		case s.Source == config.SourceDefault:
			s.Source, s.Origin = config.SourceEnv, daemon.ServerKeysEnv
		default:
			s.Origin = strings.TrimSpace(s.Origin + " and env " + daemon.ServerKeysEnv)
		}
	}
}

// errInspected ends a parse of hearth up's flags once an inspector has
// what it needs.
var errInspected = errors.New("flags inspected")

// inspectUpFlags parses hearth up's command line as hearth up would, with
// env's variables and configuration file, and calls inspect with the
// result instead of going on to check and start anything.
func inspectUpFlags(env *environment, args []string, inspect upInspector) error {
	sub := *env
	sub.inspectUp = func(fs *flag.FlagSet, file string, settings []config.Setting) error {
		if err := inspect(fs, file, settings); err != nil {
			return err
		}
		return errInspected
	}
	_, err := parseUpFlags(&sub, args)
	if errors.Is(err, errInspected) {
		return nil
	}
	return err
}

// runConfig is `hearth config`: every flag of hearth up with the value it
// would take and where that value comes from.
func runConfig(_ context.Context, env *environment, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(env.stderr, "Usage: hearth config [--config FILE] [hearth up flags]\n\nPrints each flag of hearth up as a TOML key with its effective value, and\nits source: default, file, env (a HEARTH_* variable) or flag. Secrets are hidden.")
		return flag.ErrHelp
	}
	return inspectUpFlags(env, args, func(fs *flag.FlagSet, file string, settings []config.Setting) error {
		if file == "" {
			fmt.Fprintln(env.stdout, "# no configuration file")
		} else {
			fmt.Fprintln(env.stdout, "# configuration file:", file)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		for _, s := range settings {
			values := s.Values
			if secretFlag(s.Name) {
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
	})
}

// secretFlag reports whether a flag's values must not be printed: keys,
// passwords and the join token.
func secretFlag(name string) bool {
	if name == "join" {
		return true
	}
	for _, w := range []string{"key", "token", "password", "secret"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// serviceConfigText is the configuration file hearth install writes:
// every flag of hearth up, commented, with the values the service needs.
// The defaults are the ones hearth up has with an empty environment, so
// the file does not depend on who ran the install.
func serviceConfigText() ([]byte, error) {
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	var text []byte
	err := inspectUpFlags(env, nil, func(fs *flag.FlagSet, _ string, _ []config.Setting) error {
		var err error
		text, err = config.Template(fs, installer.ServiceConfig(), "config")
		return err
	})
	return text, err
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
	config, err := serviceConfigText()
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
	svc := &environment{stdout: env.stdout, stderr: env.stderr, getenv: func(string) string { return "" }}
	var listen, tlsMode, certFile, dataDir string
	err := inspectUpFlags(svc, []string{"--config", layout.Path(installer.ConfigPath)}, func(fs *flag.FlagSet, _ string, _ []config.Setting) error {
		value := func(name string) string { return fs.Lookup(name).Value.String() }
		listen, tlsMode, certFile, dataDir = value("listen"), value("tls"), value("tls-cert"), value("data-dir")
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", nil, fmt.Errorf("listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, port)
	trust := certFile
	if tlsMode == "auto" && certFile == "" {
		trust = filepath.Join(dataDir, "tls", tlsca.CAFile)
	}
	if trust == "" {
		return "http://" + addr + "/health", nil, nil
	}
	pem, err := os.ReadFile(layout.Path(trust))
	if err != nil {
		return "", nil, fmt.Errorf("the certificates to trust for the health check: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return "", nil, fmt.Errorf("no certificate in %s", trust)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	return "https://" + addr + "/health", client, nil
}
