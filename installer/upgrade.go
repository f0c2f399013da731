package installer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/atomicfile"
)

// ErrRolledBack marks an upgrade whose new binary did not become healthy
// and was replaced by the previous one again.
var ErrRolledBack = errors.New("upgrade rolled back")

// UpgradeOptions are the choices of one upgrade.
type UpgradeOptions struct {
	// Binary is the new hearth executable.
	Binary string
	// HealthURL is polled after the restart until it answers 200 OK
	// (hearth up's GET /health).
	HealthURL string
	// Timeout bounds the wait for health (0: two minutes); Interval is the
	// pause between polls (0: half a second).
	Timeout  time.Duration
	Interval time.Duration
	// Client makes the health requests (nil: one with a 5 s timeout).
	Client *http.Client
}

// Upgrade replaces the installed binary with a new one and restarts the
// service, keeping the data and the configuration; with keep-engines set
// (the installed configuration sets it) the restarted daemon adopts the
// running engine containers instead of reloading them. The new binary must
// answer "version" before it is installed. It is copied beside the old one
// and renamed over it, so the path always holds a whole binary; the old
// one stays as hearth.prev. When the restarted service does not answer
// HealthURL within the timeout, hearth.prev is renamed back, the service
// restarted once more, and the error wraps ErrRolledBack.
func (in *Installer) Upgrade(ctx context.Context, opt UpgradeOptions) error {
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Minute
	}
	if opt.Interval <= 0 {
		opt.Interval = 500 * time.Millisecond
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 5 * time.Second}
	}
	current := in.Layout.Path(BinPath)
	if _, err := os.Stat(current); err != nil {
		return fmt.Errorf("upgrade: no installed binary (run hearth install first): %w", err)
	}
	newVersion, err := binaryVersion(ctx, opt.Binary)
	if err != nil {
		return fmt.Errorf("upgrade: the new binary does not run: %w", err)
	}
	in.say("new binary: %s", newVersion)
	if in.DryRun {
		in.say("would copy %s to %s, keep the old one as %s, restart %s and wait for %s",
			opt.Binary, BinPath, PrevBinPath, ServiceName, opt.HealthURL)
		return nil
	}
	bin, err := os.ReadFile(opt.Binary)
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	prev := in.Layout.Path(PrevBinPath)
	if err := replaceKeepingOld(current, prev, bin); err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	in.say("replaced %s (the old one is %s)", BinPath, PrevBinPath)
	healthErr := in.run(ctx, "systemctl", "restart", ServiceName)
	if healthErr == nil {
		healthErr = waitHealthy(ctx, opt)
	}
	if healthErr == nil {
		in.say("%s is healthy on %s", ServiceName, newVersion)
		return nil
	}
	in.say("the new binary is not healthy (%v); rolling back", healthErr)
	if err := os.Rename(prev, current); err != nil {
		return fmt.Errorf("upgrade: %w; rollback: %w", healthErr, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(current)); err != nil {
		return fmt.Errorf("upgrade: %w; rollback: %w", healthErr, err)
	}
	if err := in.run(ctx, "systemctl", "restart", ServiceName); err != nil {
		return fmt.Errorf("upgrade: %w; rollback restored %s but the restart failed: %w", healthErr, BinPath, err)
	}
	if err := waitHealthy(ctx, opt); err != nil {
		return fmt.Errorf("upgrade: %w: %w; the previous binary is back but not healthy either: %w", ErrRolledBack, healthErr, err)
	}
	return fmt.Errorf("upgrade: %w: the new binary was not healthy (%w); the previous one is back and healthy", ErrRolledBack, healthErr)
}

// replaceKeepingOld writes data into a new file beside current, keeps
// current as prev (a hard link, so current never goes missing), then
// renames the new file over current.
func replaceKeepingOld(current, prev string, data []byte) error {
	info, err := os.Stat(current)
	if err != nil {
		return err
	}
	if err := os.Remove(prev); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Link(current, prev); err != nil {
		// A file system without hard links: a copy will do.
		old, rerr := os.ReadFile(current)
		if rerr != nil {
			return rerr
		}
		if err := atomicfile.Write(prev, old, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return atomicfile.Write(current, data, 0o755)
}

// binaryVersion runs "BINARY version" and returns its first line.
func binaryVersion(ctx context.Context, binary string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "version").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		return "", fmt.Errorf("%s version: %w: %s", binary, err, line)
	}
	return line, nil
}

// waitHealthy polls the health URL until it answers 200 OK or the timeout
// passes; the error says what the last poll saw.
func waitHealthy(ctx context.Context, opt UpgradeOptions) error {
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	tick := time.NewTicker(opt.Interval)
	defer tick.Stop()
	var last error
	for {
		last = pollHealth(ctx, opt.Client, opt.HealthURL)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no healthy answer from %s within %s: %w", opt.HealthURL, opt.Timeout, last)
		case <-tick.C:
		}
	}
}

func pollHealth(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
