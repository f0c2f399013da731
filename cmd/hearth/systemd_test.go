package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestInstallOnRealSystemd installs the static hearth binary as a service
// on a real systemd, PID 1 of a container (CAP_SYS_ADMIN, no --privileged),
// and runs the service's life: install on a host without a docker group,
// sim set alone in the generated configuration, the hardened unit active
// and answering, an upgrade to a healthy binary, one to a binary that does
// not run, one to a binary that runs but never serves (rolled back), and
// uninstall --purge. The image is this Debian host's own systemd and the
// packages it needs, imported once per set of package versions.
func TestInstallOnRealSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: boots systemd in a container")
	}
	skipUnderRaceForChildBinaries(t)
	t.Parallel()
	dockerCLI := needDockerCLI(t)
	image := systemdImage(t, dockerCLI)
	bin := dockertest.StaticHearth(t)
	start := time.Now()

	name := fmt.Sprintf("hearth-systemd-test-%d", os.Getpid())
	dockerCmd(dockerCLI, "rm", "-f", name) // a leftover of a killed run
	if _, err := dockerCmd(dockerCLI, "run", "-d", "--name", name,
		"--cap-add", "SYS_ADMIN", "--tmpfs", "/run", "--tmpfs", "/run/lock",
		"-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "-e", "container=docker",
		"-v", bin+":/opt/hearth/hearth:ro", image, "/sbin/init"); err != nil {
		t.Fatalf("starting systemd: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := dockerCmd(dockerCLI, "exec", name, "journalctl", "--no-pager", "-n", "80", "-u", installer.ServiceName)
			t.Logf("the service's journal:\n%s", out)
		}
		dockerCmd(dockerCLI, "rm", "-f", name)
	})
	in := func(args ...string) (string, error) {
		return dockerCmd(dockerCLI, append([]string{"exec", name}, args...)...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := in(args...)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	waitBooted(t, in)
	if _, err := in("getent", "group", installer.DockerGroup); err == nil {
		t.Fatalf("the image has a %s group: the test is of a host without one", installer.DockerGroup)
	}

	// Install: the doctor fails here (no GPU, no Docker Engine), so --force.
	out := must("/opt/hearth/hearth", "install", "--force", "--no-start")
	if !strings.Contains(out, "no docker group") {
		t.Errorf("install does not say the docker group is missing:\n%s", out)
	}
	// The generated configuration, with sim set and nothing else changed.
	must("sed", "-i", `s/^# sim = ""$/sim = "1x4090"/`, installer.ConfigPath)
	if got := must("grep", "-c", `^sim = "1x4090"$`, installer.ConfigPath); strings.TrimSpace(got) != "1" {
		t.Fatalf("sim not set in %s", installer.ConfigPath)
	}
	must("systemctl", "start", installer.ServiceName)
	waitAnswering(t, in)
	if got := strings.TrimSpace(must("systemctl", "show", "-p", "User", "--value", installer.ServiceName)); got != installer.ServiceUser {
		t.Errorf("the service runs as %q", got)
	}
	t.Logf("installed and answering after %v", time.Since(start).Round(time.Millisecond))

	// An upgrade to a healthy binary: a wrapper that answers version as
	// "next" and runs the same hearth otherwise.
	must("sh", "-c", `printf '#!/bin/sh\n[ "$1" = version ] && { echo "hearth next"; exit 0; }\nexec /opt/hearth/hearth "$@"\n' >/opt/next && chmod 755 /opt/next`)
	out = must("/opt/hearth/hearth", "upgrade", "--health-timeout", "60s", "/opt/next")
	if !strings.Contains(out, "is healthy on hearth next") {
		t.Errorf("upgrade to a healthy binary:\n%s", out)
	}
	if got := must("/usr/local/bin/hearth", "version"); !strings.Contains(got, "hearth next") {
		t.Errorf("installed binary after the upgrade says %q", got)
	}

	// A binary that does not run is refused before anything changes.
	must("sh", "-c", `printf 'not a program\n' >/opt/broken && chmod 755 /opt/broken`)
	if out, err := in("/opt/hearth/hearth", "upgrade", "/opt/broken"); err == nil || !strings.Contains(out, "does not run") {
		t.Errorf("upgrade to a binary that does not run: %v\n%s", err, out)
	}
	waitAnswering(t, in)

	// A binary that runs but never serves: rolled back to the previous one.
	must("sh", "-c", `printf '#!/bin/sh\n[ "$1" = version ] && { echo "hearth sick"; exit 0; }\nexit 1\n' >/opt/sick && chmod 755 /opt/sick`)
	out, err := in("/opt/hearth/hearth", "upgrade", "--health-timeout", "8s", "/opt/sick")
	if err == nil || !strings.Contains(out, "rolled back") || !strings.Contains(out, "the previous one is back and healthy") {
		t.Errorf("upgrade to an unhealthy binary: %v\n%s", err, out)
	}
	if got := must("/usr/local/bin/hearth", "version"); !strings.Contains(got, "hearth next") {
		t.Errorf("after the rollback the installed binary says %q, want the previous one", got)
	}
	waitAnswering(t, in)

	must("/opt/hearth/hearth", "uninstall", "--purge")
	for _, p := range []string{installer.BinPath, installer.PrevBinPath, installer.UnitPath, installer.ConfigDir, installer.DataDir} {
		if _, err := in("test", "-e", p); err == nil {
			t.Errorf("%s is left after uninstall --purge", p)
		}
	}
	if _, err := in("getent", "passwd", installer.ServiceUser); err == nil {
		t.Errorf("the %s user is left after uninstall --purge", installer.ServiceUser)
	}
	if out, _ := in("systemctl", "is-active", installer.ServiceName); strings.TrimSpace(out) == "active" {
		t.Error("the service is still active after uninstall")
	}
	t.Logf("the service's life on systemd took %v", time.Since(start).Round(time.Millisecond))
}

// waitBooted waits for systemd to finish booting: running, or degraded
// (a unit a container cannot run). Until its socket is up, systemctl
// cannot ask.
func waitBooted(t *testing.T, in func(...string) (string, error)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var state string
	for time.Now().Before(deadline) {
		state, _ = in("systemctl", "is-system-running")
		if s := strings.TrimSpace(state); s == "running" || s == "degraded" {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("systemd did not boot: %s", state)
}

// waitAnswering waits for the service to be active and its API to list
// its engine as ready (hearth engines, from inside the container: the
// daemon listens on its loopback).
func waitAnswering(t *testing.T, in func(...string) (string, error)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		active, _ := in("systemctl", "is-active", installer.ServiceName)
		out, err := in("/opt/hearth/hearth", "engines")
		if strings.TrimSpace(active) == "active" && err == nil && strings.Contains(out, " ready ") {
			return
		}
		last = fmt.Sprintf("is-active %q, engines %q (%v)", strings.TrimSpace(active), strings.TrimSpace(out), err)
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the service is not active with its engine ready: %s", last)
}

// needDockerCLI returns the docker command, or skips the test where there
// is none or no Docker Engine answers it (outside CI: CI must run it).
func needDockerCLI(t *testing.T) string {
	t.Helper()
	cli, err := exec.LookPath("docker")
	if err == nil {
		_, err = dockerCmd(cli, "version", "--format", "{{.Server.Version}}")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no docker command or Docker Engine, and CI must run this test: %v", err)
		}
		t.Skipf("skipped: no docker command or Docker Engine (%v)", err)
	}
	return cli
}

func dockerCmd(cli string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// systemdRoots are the packages the image is built from, with their
// dependencies: systemd as init, the tools hearth install runs (useradd,
// chown, systemctl) and the shells the test uses.
var systemdRoots = []string{"systemd", "systemd-sysv", "passwd", "login", "coreutils", "dash", "bash", "base-files", "sed", "grep", "libc-bin", "util-linux", "mount"}

// systemdImageVersion changes when the way the image is made changes.
const systemdImageVersion = "1"

// systemdImage returns the tag of an image whose root file system is this
// host's installed systemd and the packages of systemdRoots with their
// dependencies, importing it when the Docker Engine lacks it. Its tag is a
// hash of the packages' versions. A host that is not Debian or has no
// systemd skips the test, saying why.
func systemdImage(t *testing.T, cli string) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skipf("skipped: no dpkg-query: the systemd image is made of a Debian host's packages (%v)", err)
	}
	if _, err := os.Stat("/lib/systemd/systemd"); err != nil {
		t.Skipf("skipped: systemd is not installed on this host (%v)", err)
	}
	pkgs, err := installedPackages()
	if err != nil {
		t.Fatal(err)
	}
	closure := packageClosure(pkgs, systemdRoots)
	sum := sha256.New()
	fmt.Fprintln(sum, systemdImageVersion)
	for _, p := range closure {
		fmt.Fprintln(sum, p, pkgs[p].version)
	}
	tag := "hearth-test/systemd:" + hex.EncodeToString(sum.Sum(nil))[:16]
	if _, err := dockerCmd(cli, "image", "inspect", tag); err == nil {
		return tag
	}
	started := time.Now()
	files, err := packageFiles(closure)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootFS(pw, files)) }()
	cmd := exec.Command(cli, "import", "--change", `CMD ["/sbin/init"]`, "-", tag)
	cmd.Stdin = pr
	if out, err := cmd.CombinedOutput(); err != nil {
		pr.CloseWithError(err)
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	t.Logf("imported %s (%d packages, %d files) in %v", tag, len(closure), len(files), time.Since(started).Round(time.Millisecond))
	return tag
}

type debPackage struct {
	version string
	depends string // Pre-Depends and Depends, as dpkg writes them
}

// installedPackages lists this host's installed packages with their
// versions and dependencies.
func installedPackages() (map[string]debPackage, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package}\t${db:Status-Status}\t${Version}\t${Pre-Depends}, ${Depends}\n").Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query: %w", err)
	}
	pkgs := map[string]debPackage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 4)
		if len(f) == 4 && f[1] == "installed" {
			p := pkgs[f[0]]
			p.version, p.depends = f[2], p.depends+", "+f[3]
			pkgs[f[0]] = p
		}
	}
	return pkgs, sc.Err()
}

// packageClosure is roots and everything they depend on, each group of
// alternatives by its first installed member, sorted.
func packageClosure(pkgs map[string]debPackage, roots []string) []string {
	seen := map[string]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		p, ok := pkgs[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		for _, group := range strings.Split(p.depends, ",") {
			for _, alt := range strings.Split(group, "|") {
				alt = strings.TrimSpace(alt)
				if i := strings.IndexAny(alt, " ("); i >= 0 {
					alt = alt[:i]
				}
				alt, _, _ = strings.Cut(alt, ":")
				if _, ok := pkgs[alt]; ok {
					queue = append(queue, alt)
					break
				}
			}
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// packageFiles are the files and links the packages installed, by the
// path through real directories (on a merged /usr, /lib/x is /usr/lib/x).
func packageFiles(pkgs []string) ([]string, error) {
	out, err := exec.Command("dpkg-query", append([]string{"-L"}, pkgs...)...).Output()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("dpkg-query -L: %w", err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "/") {
			continue
		}
		info, err := os.Lstat(line)
		if err != nil || info.IsDir() {
			continue
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(line))
		if err != nil {
			continue
		}
		set[filepath.Join(dir, filepath.Base(line))] = true
	}
	files := make([]string, 0, len(set))
	for f := range set {
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// writeRootFS writes the root file system as a tar: the host's files, the
// top-level links of a merged /usr, and what a debootstrap would have
// made: account files with root alone, an empty machine id.
func writeRootFS(w io.Writer, files []string) error {
	generated := []struct {
		name string
		mode int64
		text string
	}{
		{"etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{"etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n"},
		{"etc/shadow", 0o640, "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n"},
		{"etc/gshadow", 0o640, "root:*::\nnogroup:*::\n"},
		{"etc/nsswitch.conf", 0o644, "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"},
		{"etc/hosts", 0o644, "127.0.0.1 localhost\n"},
		{"etc/machine-id", 0o444, ""},
	}
	own := map[string]bool{}
	for _, f := range generated {
		own[f.name] = true
	}
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	addDir := func(p string, mode int64) error {
		if dirs[p] {
			return nil
		}
		dirs[p] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode})
	}
	var parents func(p string) error
	parents = func(p string) error {
		d := filepath.Dir(p)
		if d == "." || d == "/" || dirs[strings.TrimPrefix(d, "/")] {
			return nil
		}
		if err := parents(d); err != nil {
			return err
		}
		return addDir(strings.TrimPrefix(d, "/"), 0o755)
	}
	for _, d := range []string{"etc", "proc", "sys", "dev", "run", "root", "var", "etc/systemd/system"} {
		if err := addDir(d, 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{"tmp", "var/tmp"} {
		if err := addDir(d, 0o1777); err != nil {
			return err
		}
	}
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		if target, err := os.Readlink("/" + top); err == nil {
			own[top] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: top, Linkname: target}); err != nil {
				return err
			}
		}
	}
	for _, p := range files {
		if own[strings.TrimPrefix(p, "/")] {
			continue
		}
		if err := parents(p); err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: int64(info.Mode().Perm())}
		if info.Mode()&fs.ModeSetuid != 0 {
			hdr.Mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			hdr.Mode |= 0o2000
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	for _, f := range generated {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.text))}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f.text); err != nil {
			return err
		}
	}
	return tw.Close()
}
