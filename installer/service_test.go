package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// systemdAnalyze finds systemd-analyze, installing Debian's systemd package
// when it is missing and the test may (root, apt-get present); the test
// skips, saying why, when it cannot be had.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("systemd-analyze"); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("apt-get"); err == nil {
			out, err := exec.Command("apt-get", "install", "-y", "systemd").CombinedOutput()
			if p, lerr := exec.LookPath("systemd-analyze"); err == nil && lerr == nil {
				return p
			}
			t.Skipf("systemd-analyze is missing and apt-get install -y systemd failed: %v: %s", err, lastLines(string(out), 3))
		}
	}
	t.Skip("systemd-analyze is missing and cannot be installed here (needs root and apt-get): install Debian's systemd package")
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestUnitVerifies runs systemd-analyze verify on the unit. verify also
// checks that ExecStart's program exists, so the unit's binary path is
// pointed at a real executable for the check; every other line is the
// installed unit's.
func TestUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hearth")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := strings.Replace(Unit(true), "ExecStart="+BinPath, "ExecStart="+bin, 1)
	if unit == Unit(true) {
		t.Fatal("the unit's ExecStart does not start with " + BinPath)
	}
	path := filepath.Join(dir, ServiceName)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
	// A unit systemd rejects must fail the same check, or the check
	// proves nothing.
	bad := strings.Replace(unit, "Restart=on-failure", "Restart=sometimes", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == "" {
		t.Error("systemd-analyze verify accepts Restart=sometimes: the check cannot fail")
	}
}

func TestUnitHardening(t *testing.T) {
	unit := Unit(true)
	for _, want := range []string{
		"ExecStart=" + BinPath + " up --config " + ConfigPath + "\n",
		"User=" + ServiceUser + "\n", "Group=" + ServiceUser + "\n", "SupplementaryGroups=" + DockerGroup + "\n",
		"NoNewPrivileges=yes\n", "ProtectSystem=strict\n", "ProtectHome=yes\n", "PrivateTmp=yes\n",
		"ReadWritePaths=" + DataDir + "\n", "StateDirectory=hearth\n",
		"Restart=on-failure\n", "RestartSec=", "TimeoutStopSec=90s\n", "WantedBy=multi-user.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	// Engines need the GPUs' device files.
	if strings.Contains(unit, "PrivateDevices") {
		t.Error("unit hides /dev from the engines")
	}
	// The service keeps its engines across restarts through its config.
	if got := ServiceConfig()["keep-engines"]; len(got) != 1 || got[0] != "true" {
		t.Errorf("service config keep-engines = %q", got)
	}
}
