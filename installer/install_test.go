package installer

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recordingHost records the commands it is asked to run and answers the
// account lookups from its fields. onRun, when set, acts out a command
// (a restart starting the installed binary).
type recordingHost struct {
	mu       sync.Mutex
	commands []string
	users    map[string]bool
	groups   map[string]bool
	fail     map[string]error // by command line
	onRun    func(line string) error
}

func (h *recordingHost) Run(_ context.Context, name string, args ...string) error {
	line := CommandLine(name, args...)
	h.mu.Lock()
	h.commands = append(h.commands, line)
	err := h.fail[line]
	h.mu.Unlock()
	if err == nil && h.onRun != nil {
		err = h.onRun(line)
	}
	return err
}

func (h *recordingHost) UserExists(name string) (bool, error)  { return h.users[name], nil }
func (h *recordingHost) GroupExists(name string) (bool, error) { return h.groups[name], nil }

func (h *recordingHost) ran() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.commands...)
}

func fakeBinary(t *testing.T, dir, name, script string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

func TestInstallLayout(t *testing.T) {
	root := t.TempDir()
	bin := fakeBinary(t, t.TempDir(), "hearth", `echo "hearth v1"`)
	host := &recordingHost{groups: map[string]bool{DockerGroup: true}}
	var out bytes.Buffer
	in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &out}
	config := []byte("# listen = \"127.0.0.1:8000\"\n")
	if err := in.Install(context.Background(), InstallOptions{Binary: bin, Config: config}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	files := []struct {
		path string
		mode fs.FileMode
		want []byte
	}{
		{BinPath, 0o755, mustRead(t, bin)},
		{ConfigPath, 0o644, config},
		{UnitPath, 0o644, []byte(Unit(true))},
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if got := mustRead(t, p); !bytes.Equal(got, f.want) {
			t.Errorf("%s holds %q, want %q", f.path, got, f.want)
		}
		if m := mode(t, p).Perm(); m != f.mode {
			t.Errorf("%s mode %04o, want %04o", f.path, m, f.mode)
		}
	}
	if m := mode(t, filepath.Join(root, DataDir)); !m.IsDir() || m.Perm() != 0o750 {
		t.Errorf("data directory mode %v, want a 0750 directory", m)
	}
	// Parents made for the layout stay traversable.
	if m := mode(t, filepath.Join(root, "var")).Perm(); m != 0o755 {
		t.Errorf("/var made %04o", m)
	}
	want := []string{
		"useradd --system --user-group --home-dir /var/lib/hearth --no-create-home --shell /usr/sbin/nologin --comment 'Hearth daemon' hearth",
		"usermod -aG docker hearth",
		"chown -R hearth:hearth /var/lib/hearth",
		"systemctl daemon-reload",
		"systemctl enable --now hearth.service",
	}
	if got := host.ran(); !reflect.DeepEqual(got, want) {
		t.Errorf("ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing was written outside the root: every path in it is one of
	// the layout's or a parent of one.
	allowed := map[string]bool{}
	for _, p := range []string{BinPath, ConfigPath, UnitPath, DataDir} {
		for q := p; q != "/"; q = filepath.Dir(q) {
			allowed[q] = true
		}
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel := strings.TrimPrefix(p, root)
		if rel != "" && !allowed[rel] {
			t.Errorf("install left %s", rel)
		}
		return err
	})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A second install replaces the binary and the unit, keeps the edited
// configuration, and creates no user that exists.
func TestReinstallKeepsConfig(t *testing.T) {
	root := t.TempDir()
	dir := t.TempDir()
	host := &recordingHost{}
	in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &bytes.Buffer{}}
	ctx := context.Background()
	if err := in.Install(ctx, InstallOptions{Binary: fakeBinary(t, dir, "v1", "echo v1"), Config: []byte("first\n")}); err != nil {
		t.Fatal(err)
	}
	edited := []byte("listen = \"0.0.0.0:8000\"\n")
	os.WriteFile(filepath.Join(root, ConfigPath), edited, 0o644)
	host.users = map[string]bool{ServiceUser: true}
	host.commands = nil
	v2 := fakeBinary(t, dir, "v2", "echo v2")
	if err := in.Install(ctx, InstallOptions{Binary: v2, Config: []byte("second\n"), NoStart: true}); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(root, ConfigPath)); !bytes.Equal(got, edited) {
		t.Errorf("config %q, want the edited %q", got, edited)
	}
	if got := mustRead(t, filepath.Join(root, BinPath)); !bytes.Equal(got, mustRead(t, v2)) {
		t.Errorf("binary not replaced: %q", got)
	}
	for _, c := range host.ran() {
		if strings.HasPrefix(c, "useradd") || strings.HasPrefix(c, "usermod") || c == "systemctl enable --now hearth.service" {
			t.Errorf("reinstall ran %q (user exists, no docker group, --no-start)", c)
		}
	}
	if got := host.ran(); got[len(got)-1] != "systemctl enable hearth.service" {
		t.Errorf("last command %q, want enable without --now", got[len(got)-1])
	}
}

func TestInstallPreflight(t *testing.T) {
	failed := errors.New("doctor: 1 check failed: nvidia driver")
	cases := []struct {
		name      string
		preflight error
		force     bool
		wantErr   error
		installed bool
	}{
		{"checks pass", nil, false, nil, true},
		{"a check fails", failed, false, ErrPreflight, false},
		{"a check fails, forced", failed, true, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			host := &recordingHost{}
			var out bytes.Buffer
			in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &out}
			ran := false
			err := in.Install(context.Background(), InstallOptions{
				Binary: fakeBinary(t, t.TempDir(), "hearth", "true"), Config: []byte("x\n"), Force: tc.force,
				Preflight: func(context.Context) error { ran = true; return tc.preflight },
			})
			if !ran {
				t.Error("preflight did not run")
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--force") {
				t.Errorf("error %q does not mention --force", err)
			}
			_, statErr := os.Stat(filepath.Join(root, BinPath))
			if installed := statErr == nil; installed != tc.installed {
				t.Errorf("binary installed %v, want %v", installed, tc.installed)
			}
			if !tc.installed && len(host.ran()) > 0 {
				t.Errorf("a stopped install ran %q", host.ran())
			}
		})
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	root := t.TempDir()
	host := &recordingHost{groups: map[string]bool{DockerGroup: true}}
	var out bytes.Buffer
	in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &out, DryRun: true}
	ctx := context.Background()
	if err := in.Install(ctx, InstallOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", "true"), Config: []byte("x\n")}); err != nil {
		t.Fatal(err)
	}
	if err := in.Uninstall(ctx, UninstallOptions{Purge: true}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) > 0 {
		t.Errorf("dry run created %v", entries)
	}
	if len(host.ran()) > 0 {
		t.Errorf("dry run ran %q", host.ran())
	}
	for _, want := range []string{
		"would write /usr/local/bin/hearth (0755", "would write /etc/hearth/hearth.toml (0644",
		"would write /etc/systemd/system/hearth.service", "would create /var/lib/hearth/ (0750)",
		"would run: useradd --system", "would run: systemctl enable --now hearth.service",
		"would run: systemctl disable --now hearth.service",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
}

// PrintHost, which hearth install uses under --root, runs nothing and
// prints every command.
func TestPrintHost(t *testing.T) {
	var out bytes.Buffer
	in := &Installer{Layout: Layout{Root: t.TempDir()}, Host: PrintHost{W: &out}, Out: &out}
	if err := in.Install(context.Background(), InstallOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", "true"), Config: []byte("x\n")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"would run: useradd", "would run: usermod -aG docker hearth", "would run: systemctl enable --now hearth.service"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUninstall(t *testing.T) {
	for _, purge := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep data", true: "purge"}[purge], func(t *testing.T) {
			root := t.TempDir()
			host := &recordingHost{groups: map[string]bool{DockerGroup: true}}
			in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &bytes.Buffer{}}
			ctx := context.Background()
			if err := in.Install(ctx, InstallOptions{Binary: fakeBinary(t, t.TempDir(), "hearth", "true"), Config: []byte("x\n")}); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(root, DataDir, "hearth.db")
			os.WriteFile(data, []byte("state"), 0o600)
			os.WriteFile(filepath.Join(root, PrevBinPath), []byte("old"), 0o755)
			host.commands = nil
			host.users = map[string]bool{ServiceUser: true}
			// The service may already be gone: uninstall goes on.
			host.fail = map[string]error{"systemctl disable --now hearth.service": errors.New("unit hearth.service does not exist")}
			if err := in.Uninstall(ctx, UninstallOptions{Purge: purge}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{BinPath, PrevBinPath, UnitPath} {
				if _, err := os.Stat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s remains (%v)", p, err)
				}
			}
			for _, p := range []string{data, filepath.Join(root, ConfigPath)} {
				_, err := os.Stat(p)
				if kept := err == nil; kept == purge {
					t.Errorf("%s kept %v with purge %v", p, kept, purge)
				}
			}
			want := []string{"systemctl disable --now hearth.service", "systemctl daemon-reload"}
			if purge {
				want = append(want, "userdel hearth")
			}
			if got := host.ran(); !reflect.DeepEqual(got, want) {
				t.Errorf("ran %q, want %q", got, want)
			}
			// Uninstalling twice is fine.
			if err := in.Uninstall(ctx, UninstallOptions{Purge: purge}); err != nil {
				t.Errorf("second uninstall: %v", err)
			}
		})
	}
}

// On a host without a docker group, a unit naming it makes systemd refuse
// to start the service (status=216/GROUP): the unit names the group only
// where it exists, and a reinstall once Docker is there adds it.
func TestUnitNamesTheDockerGroupOnlyWhereItExists(t *testing.T) {
	root := t.TempDir()
	bin := fakeBinary(t, t.TempDir(), "hearth", `echo "hearth v1"`)
	host := &recordingHost{groups: map[string]bool{}}
	var out bytes.Buffer
	in := &Installer{Layout: Layout{Root: root}, Host: host, Out: &out}
	if err := in.Install(context.Background(), InstallOptions{Binary: bin, Config: []byte("\n"), Force: true}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	unit := string(mustRead(t, filepath.Join(root, UnitPath)))
	if strings.Contains(unit, "SupplementaryGroups=") {
		t.Errorf("without a %s group the unit names one:\n%s", DockerGroup, unit)
	}
	if !strings.Contains(out.String(), "no docker group") {
		t.Errorf("install does not say the group is missing:\n%s", out.String())
	}
	host.groups[DockerGroup] = true
	if err := in.Install(context.Background(), InstallOptions{Binary: bin, Config: []byte("\n")}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if unit := string(mustRead(t, filepath.Join(root, UnitPath))); !strings.Contains(unit, "SupplementaryGroups="+DockerGroup+"\n") {
		t.Errorf("with the group, the reinstalled unit lacks it:\n%s", unit)
	}
}
