package installer

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeService plays systemd and the daemon for an upgrade: a restart runs
// the installed binary ("hearth version") and the health endpoint, a real
// HTTP server, answers 200 unless the running binary said it is
// unhealthy.
type fakeService struct {
	t       *testing.T
	binPath string
	mu      sync.Mutex
	running string
	server  *httptest.Server
}

func newFakeService(t *testing.T, root string) (*fakeService, *recordingHost) {
	s := &fakeService{t: t, binPath: filepath.Join(root, BinPath)}
	s.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if r.URL.Path != "/health" || strings.Contains(running, "unhealthy") {
			http.Error(w, running, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(s.server.Close)
	host := &recordingHost{onRun: func(line string) error {
		if line != "systemctl restart hearth.service" {
			return nil
		}
		out, err := exec.Command(s.binPath, "version").CombinedOutput()
		s.mu.Lock()
		s.running = strings.TrimSpace(string(out))
		s.mu.Unlock()
		return err
	}}
	return s, host
}

func (s *fakeService) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func TestUpgrade(t *testing.T) {
	cases := []struct {
		name      string
		old, new  string // the binaries' "version" scripts
		wantErr   error
		wantBin   string // the installed binary's version afterwards
		restarts  int
		running   string
		errSays   string
		noInstall bool
	}{
		{name: "healthy", old: `echo "hearth v1"`, new: `echo "hearth v2"`, wantBin: "hearth v2", restarts: 1, running: "hearth v2"},
		{name: "unhealthy rolls back", old: `echo "hearth v1"`, new: `echo "hearth v2 unhealthy"`, wantErr: ErrRolledBack,
			wantBin: "hearth v1", restarts: 2, running: "hearth v1", errSays: "previous one is back and healthy"},
		{name: "a failed restart rolls back", old: `echo "hearth v1"`, new: `[ "$1" = version ] && [ -n "$HEARTH_STARTED" ] && exit 3; echo "hearth v2"`,
			wantErr: ErrRolledBack, wantBin: "hearth v1", restarts: 2, running: "hearth v1"},
		{name: "old unhealthy too", old: `echo "hearth v1 unhealthy"`, new: `echo "hearth v2 unhealthy"`, wantErr: ErrRolledBack,
			wantBin: "hearth v1 unhealthy", restarts: 2, running: "hearth v1 unhealthy", errSays: "not healthy either"},
		{name: "a binary that does not run", old: `echo "hearth v1"`, new: `echo "exec format error" >&2; exit 126`,
			wantBin: "hearth v1", restarts: 0, errSays: "does not run", noInstall: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			svc, host := newFakeService(t, root)
			var out bytes.Buffer
			in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &out}
			ctx := context.Background()
			if err := in.Install(ctx, InstallOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", tc.old), Config: []byte("x\n")}); err != nil {
				t.Fatal(err)
			}
			host.commands = nil
			newBin := fakeBinary(t, t.TempDir(), "hearth-new", tc.new)
			// The "failed restart" binary answers version before it is
			// installed, and fails once the service starts it.
			t.Setenv("HEARTH_STARTED", "")
			if strings.Contains(tc.new, "HEARTH_STARTED") {
				host.onRun = startedEnv(host.onRun)
			}
			err := in.Upgrade(ctx, UpgradeOptions{Binary: newBin, HealthURL: svc.server.URL + "/health",
				Timeout: 300 * time.Millisecond, Interval: 10 * time.Millisecond})
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.wantErr == nil && (err == nil) != (tc.errSays == "") {
				t.Fatalf("err %v, want %v\n%s", err, tc.wantErr, out.String())
			}
			if tc.errSays != "" && (err == nil || !strings.Contains(err.Error(), tc.errSays)) {
				t.Errorf("error %v does not say %q", err, tc.errSays)
			}
			got, verr := exec.Command(filepath.Join(root, BinPath), "version").Output()
			if verr != nil || strings.TrimSpace(string(got)) != tc.wantBin {
				t.Errorf("installed binary says %q (%v), want %q", got, verr, tc.wantBin)
			}
			restarts := 0
			for _, c := range host.ran() {
				if c == "systemctl restart hearth.service" {
					restarts++
				}
			}
			if restarts != tc.restarts {
				t.Errorf("%d restarts, want %d: %q", restarts, tc.restarts, host.ran())
			}
			if svc.current() != tc.running {
				t.Errorf("service runs %q, want %q", svc.current(), tc.running)
			}
			_, prevErr := os.Stat(filepath.Join(root, PrevBinPath))
			if kept := prevErr == nil; kept != (tc.wantErr == nil && !tc.noInstall) {
				t.Errorf("hearth.prev kept %v", kept)
			}
			if tc.wantErr == nil && !tc.noInstall {
				prev, _ := exec.Command(filepath.Join(root, PrevBinPath), "version").Output()
				if strings.TrimSpace(string(prev)) != "hearth v1" {
					t.Errorf("hearth.prev says %q, want the old binary", prev)
				}
			}
		})
	}
}

// startedEnv sets HEARTH_STARTED while a restart runs the binary, so a
// fake binary can tell the service's start from the upgrade's own check.
func startedEnv(next func(string) error) func(string) error {
	return func(line string) error {
		os.Setenv("HEARTH_STARTED", "1")
		defer os.Setenv("HEARTH_STARTED", "")
		return next(line)
	}
}

func TestUpgradeWithoutInstall(t *testing.T) {
	in := &Installer{Layout: Layout{Root: t.TempDir()}, Host: &recordingHost{}, Out: &bytes.Buffer{}}
	err := in.Upgrade(context.Background(), UpgradeOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", "echo v2"), HealthURL: "http://127.0.0.1:1/health"})
	if err == nil || !strings.Contains(err.Error(), "hearth install") {
		t.Errorf("err %v, want one saying to install first", err)
	}
}

func TestUpgradeDryRun(t *testing.T) {
	root := t.TempDir()
	host := &recordingHost{}
	in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &bytes.Buffer{}}
	ctx := context.Background()
	old := fakeBinary(t, t.TempDir(), "hearth", "echo v1")
	if err := in.Install(ctx, InstallOptions{Binary: old, Config: []byte("x\n")}); err != nil {
		t.Fatal(err)
	}
	host.commands = nil
	in.DryRun = true
	if err := in.Upgrade(ctx, UpgradeOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", "echo v2"), HealthURL: "http://127.0.0.1:1/health"}); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(root, BinPath)); !bytes.Equal(got, mustRead(t, old)) || len(host.ran()) > 0 {
		t.Errorf("dry run changed the binary or ran %q", host.ran())
	}
	if !reflect.DeepEqual(host.ran(), []string(nil)) {
		t.Errorf("ran %q", host.ran())
	}
}
