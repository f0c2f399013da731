package installer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hearth-llm/hearth/atomicfile"
)

// ErrPreflight marks an install stopped because a host check failed.
var ErrPreflight = errors.New("host checks failed")

// Installer installs, removes and upgrades the service. Files go under
// Layout; everything else goes through Host. With DryRun it writes nothing
// and prints what it would do to Out.
type Installer struct {
	Layout Layout
	Host   Host
	Out    io.Writer
	DryRun bool
}

// InstallOptions are the choices of one install.
type InstallOptions struct {
	// Binary is the hearth executable to install (usually the running one).
	Binary string
	// Config is the text of the configuration file, written only when
	// none exists: a reinstall keeps the user's edits.
	Config []byte
	// Preflight runs the host checks (hearth doctor) and returns an error
	// when one fails, having printed the checks and their fixes. Force
	// goes on regardless. Nil runs none.
	Preflight func(ctx context.Context) error
	Force     bool
	// NoStart enables the service without starting it.
	NoStart bool
}

// Install puts Hearth on the system: the binary, the data directory, the
// configuration file, the systemd unit and the service user, then enables
// and starts the service. It is idempotent: run again, it replaces the
// binary and the unit and leaves the configuration and the data alone.
func (in *Installer) Install(ctx context.Context, opt InstallOptions) error {
	if opt.Preflight != nil {
		if err := opt.Preflight(ctx); err != nil {
			if !opt.Force {
				return fmt.Errorf("install: %w: %w (fix them, or pass --force to install anyway)", ErrPreflight, err)
			}
			in.say("host checks failed; installing anyway (--force): %v", err)
		}
	}
	bin, err := os.ReadFile(opt.Binary)
	if err != nil {
		return fmt.Errorf("install: the binary: %w", err)
	}
	docker, err := in.Host.GroupExists(DockerGroup)
	if err != nil {
		return fmt.Errorf("install: look up group %s: %w", DockerGroup, err)
	}
	steps := []func() error{
		func() error { return in.mkdir(filepath.Dir(BinPath), 0o755, false) },
		func() error { return in.writeFile(BinPath, bin, 0o755) },
		func() error { return in.mkdir(ConfigDir, 0o755, true) },
		func() error { return in.writeConfig(opt.Config) },
		func() error { return in.mkdir(DataDir, 0o750, true) },
		func() error { return in.mkdir(filepath.Dir(UnitPath), 0o755, false) },
		func() error { return in.writeFile(UnitPath, []byte(Unit(docker)), 0o644) },
		func() error { return in.ensureUser(ctx, docker) },
		func() error { return in.run(ctx, "chown", "-R", ServiceUser+":"+ServiceUser, DataDir) },
		func() error { return in.run(ctx, "systemctl", "daemon-reload") },
	}
	if opt.NoStart {
		steps = append(steps, func() error { return in.run(ctx, "systemctl", "enable", ServiceName) })
	} else {
		steps = append(steps, func() error { return in.run(ctx, "systemctl", "enable", "--now", ServiceName) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	return nil
}

// ensureUser creates the service's system user and group, with the data
// directory as its home, and adds it to the docker group when there is
// one (the unit names the group as well).
func (in *Installer) ensureUser(ctx context.Context, docker bool) error {
	exists, err := in.Host.UserExists(ServiceUser)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", ServiceUser, err)
	}
	if !exists {
		if err := in.run(ctx, "useradd", "--system", "--user-group", "--home-dir", DataDir, "--no-create-home",
			"--shell", "/usr/sbin/nologin", "--comment", "Hearth daemon", ServiceUser); err != nil {
			return err
		}
	}
	if !docker {
		in.say("no %s group: the service runs without Docker; install Docker, then run hearth install again", DockerGroup)
		return nil
	}
	return in.run(ctx, "usermod", "-aG", DockerGroup, ServiceUser)
}

func (in *Installer) writeConfig(text []byte) error {
	path := in.Layout.Path(ConfigPath)
	if _, err := os.Stat(path); err == nil {
		in.say("keep %s (exists)", ConfigPath)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return in.writeFile(ConfigPath, text, 0o644)
}

// UninstallOptions are the choices of one uninstall.
type UninstallOptions struct {
	// Purge also removes the data directory, the configuration and the
	// service user.
	Purge bool
}

// Uninstall stops and disables the service and removes the unit and the
// binary (and the one an upgrade kept). The data directory and the
// configuration stay unless Purge. Files already gone are not an error.
func (in *Installer) Uninstall(ctx context.Context, opt UninstallOptions) error {
	// A service that is not there cannot be stopped: that is not a reason
	// to stop removing the rest.
	if err := in.run(ctx, "systemctl", "disable", "--now", ServiceName); err != nil {
		in.say("%v (continuing)", err)
	}
	for _, p := range []string{UnitPath, BinPath, PrevBinPath} {
		if err := in.remove(p, false); err != nil {
			return fmt.Errorf("uninstall: %w", err)
		}
	}
	if err := in.run(ctx, "systemctl", "daemon-reload"); err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	if !opt.Purge {
		in.say("kept %s and %s (hearth uninstall --purge removes them)", DataDir, ConfigDir)
		return nil
	}
	for _, p := range []string{DataDir, ConfigDir} {
		if err := in.remove(p, true); err != nil {
			return fmt.Errorf("uninstall: %w", err)
		}
	}
	exists, err := in.Host.UserExists(ServiceUser)
	if err != nil {
		return fmt.Errorf("uninstall: look up user %s: %w", ServiceUser, err)
	}
	if exists {
		if err := in.run(ctx, "userdel", ServiceUser); err != nil {
			return fmt.Errorf("uninstall: %w", err)
		}
	}
	return nil
}

func (in *Installer) say(format string, args ...any) {
	fmt.Fprintf(in.Out, format+"\n", args...)
}

// run runs a command through the Host, saying so first.
func (in *Installer) run(ctx context.Context, name string, args ...string) error {
	if in.DryRun {
		in.say("would run: %s", CommandLine(name, args...))
		return nil
	}
	if _, printing := in.Host.(PrintHost); !printing {
		in.say("run: %s", CommandLine(name, args...))
	}
	return in.Host.Run(ctx, name, args...)
}

// mkdir creates directory p and its missing parents (0755); own says
// that p is the service's, whose mode is set even when it exists. A
// directory shared with the system (/usr/local/bin) keeps its mode.
func (in *Installer) mkdir(p string, mode fs.FileMode, own bool) error {
	if in.DryRun {
		in.say("would create %s/ (%04o)", p, mode)
		return nil
	}
	path := in.Layout.Path(p)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(path, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	} else if err == nil || own {
		// The umask trims a new directory's mode.
		return os.Chmod(path, mode)
	}
	return nil
}

// writeFile replaces p atomically: the new text goes into a temporary file
// beside it, synced, then renamed over p, so that p is never half written.
func (in *Installer) writeFile(p string, data []byte, mode fs.FileMode) error {
	if in.DryRun {
		in.say("would write %s (%04o, %d bytes)", p, mode, len(data))
		return nil
	}
	in.say("write %s", p)
	return atomicfile.Write(in.Layout.Path(p), data, mode)
}

func (in *Installer) remove(p string, all bool) error {
	path := in.Layout.Path(p)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if in.DryRun {
		in.say("would remove %s", p)
		return nil
	}
	in.say("remove %s", p)
	if all {
		return os.RemoveAll(path)
	}
	return os.Remove(path)
}
