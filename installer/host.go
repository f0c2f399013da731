package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"os/user"
	"strings"
)

// Host is what an install does to the system beyond writing its files:
// the commands it runs (useradd, chown, systemctl) and the accounts it
// looks up. Tests record the calls; --root and --dry-run print them.
type Host interface {
	// Run runs a command to completion; a non-zero exit is an error that
	// carries the command's output.
	Run(ctx context.Context, name string, args ...string) error
	UserExists(name string) (bool, error)
	GroupExists(name string) (bool, error)
}

// SystemHost is the Host of the machine the process runs on.
type SystemHost struct{}

var _ Host = SystemHost{}

// Run implements Host.
func (SystemHost) Run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return fmt.Errorf("%s: %w", CommandLine(name, args...), err)
		}
		return fmt.Errorf("%s: %w: %s", CommandLine(name, args...), err, msg)
	}
	return nil
}

// UserExists implements Host.
func (SystemHost) UserExists(name string) (bool, error) {
	_, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return false, nil
	}
	return err == nil, err
}

// GroupExists implements Host.
func (SystemHost) GroupExists(name string) (bool, error) {
	_, err := user.LookupGroup(name)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		return false, nil
	}
	return err == nil, err
}

// PrintHost runs nothing: it prints each command it is asked to run, as
// "would run: …". Accounts are looked up on Lookup when set (a dry run on
// the real machine); without it the service user is taken to be missing
// and the docker group present, so that the printed plan is the full one
// (an install under --root, which must not depend on the building host).
type PrintHost struct {
	W      io.Writer
	Lookup Host
}

var _ Host = PrintHost{}

// Run implements Host.
func (p PrintHost) Run(_ context.Context, name string, args ...string) error {
	_, err := fmt.Fprintln(p.W, "would run:", CommandLine(name, args...))
	return err
}

// UserExists implements Host.
func (p PrintHost) UserExists(name string) (bool, error) {
	if p.Lookup != nil {
		return p.Lookup.UserExists(name)
	}
	return false, nil
}

// GroupExists implements Host.
func (p PrintHost) GroupExists(name string) (bool, error) {
	if p.Lookup != nil {
		return p.Lookup.GroupExists(name)
	}
	return true, nil
}

// CommandLine writes a command as a shell would read it back, quoting
// arguments that need it.
func CommandLine(name string, args ...string) string {
	parts := []string{shellQuote(name)}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
