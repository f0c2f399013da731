package installer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeHearthScript stands in for the released binary: it records its
// arguments in $FAKE_HEARTH_LOG.
const fakeHearthScript = "#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$FAKE_HEARTH_LOG\"\n"

// releaseArchive writes a release archive holding the fake hearth, as a
// release would lay it out (a directory with the binary in it).
func releaseArchive(t *testing.T, path string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	body := []byte(fakeHearthScript)
	for _, h := range []*tar.Header{
		{Name: "hearth_linux/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "hearth_linux/README.md", Mode: 0o644, Size: 6},
		{Name: "hearth_linux/hearth", Mode: 0o755, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "hearth_linux/README.md":
			tw.Write([]byte("hello\n"))
		case "hearth_linux/hearth":
			tw.Write(body)
		}
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func goArch(t *testing.T) string {
	out, err := exec.Command("uname", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	switch strings.TrimSpace(string(out)) {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	}
	t.Skipf("install.sh supports amd64 and arm64, not %s", out)
	return ""
}

// runInstallSh runs install.sh with sh, offline, with only env and a
// PATH of the system's directories (plus extra, first).
func runInstallSh(t *testing.T, env []string, extraPath string, args ...string) (string, error) {
	t.Helper()
	path := "/usr/bin:/bin:/usr/sbin:/sbin"
	if extraPath != "" {
		path = extraPath + ":" + path
	}
	cmd := exec.Command("sh", append([]string{"install.sh"}, args...)...)
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestInstallShFromArchive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("install.sh installs on Linux")
	}
	arch := goArch(t)
	cases := []struct {
		name    string
		sums    string // "": none; "good", "bad"; "list": a SHA256SUMS file
		byURL   bool   // HEARTH_ARCHIVE_URL instead of HEARTH_RELEASE_BASE
		wantErr string
	}{
		{name: "release base, no checksum"},
		{name: "release base, good checksum", sums: "good"},
		{name: "release base, SHA256SUMS", sums: "list"},
		{name: "archive url, good checksum", sums: "good", byURL: true},
		{name: "bad checksum", sums: "bad", wantErr: "checksum mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := t.TempDir()
			name := "hearth_linux_" + arch + ".tar.gz"
			archive := filepath.Join(release, name)
			data := releaseArchive(t, archive)
			sum := sha256.Sum256(data)
			good := hex.EncodeToString(sum[:])
			switch tc.sums {
			case "good":
				os.WriteFile(archive+".sha256", []byte(good+"  "+name+"\n"), 0o644)
			case "bad":
				os.WriteFile(archive+".sha256", []byte(strings.Repeat("0", 64)+"\n"), 0o644)
			case "list":
				os.WriteFile(filepath.Join(release, "SHA256SUMS"), []byte(strings.Repeat("1", 64)+"  other.tar.gz\n"+good+"  "+name+"\n"), 0o644)
			}
			log := filepath.Join(t.TempDir(), "args")
			root := t.TempDir()
			env := []string{"FAKE_HEARTH_LOG=" + log}
			if tc.byURL {
				env = append(env, "HEARTH_ARCHIVE_URL=file://"+archive)
			} else {
				env = append(env, "HEARTH_RELEASE_BASE=file://"+release)
			}
			out, err := runInstallSh(t, env, "", "--root", root, "--force")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("err %v, output %q, want %q", err, out, tc.wantErr)
				}
				if _, err := os.Stat(log); err == nil {
					t.Error("hearth install ran after a failed check")
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			args, err := os.ReadFile(log)
			if err != nil {
				t.Fatalf("hearth never ran: %v\n%s", err, out)
			}
			if got, want := string(args), "install --root "+root+" --force\n"; got != want {
				t.Errorf("hearth ran with %q, want %q", got, want)
			}
			if tc.sums != "" && !strings.Contains(out, "verified") {
				t.Errorf("checksum not reported verified:\n%s", out)
			}
		})
	}
}

// With no archive to fetch and Go on the PATH, install.sh builds with go
// install (here a fake go that records how it was called and drops the
// fake hearth into $GOBIN).
func TestInstallShGoFallback(t *testing.T) {
	goArch(t)
	bin := t.TempDir()
	goLog := filepath.Join(t.TempDir(), "go")
	fakeGo := "#!/bin/sh\nprintf '%s\\n' \"$*\" > " + goLog + "\nmkdir -p \"$GOBIN\"\ncat > \"$GOBIN/hearth\" <<'EOF'\n" + fakeHearthScript + "EOF\nchmod +x \"$GOBIN/hearth\"\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "args")
	root := t.TempDir()
	out, err := runInstallSh(t, []string{"FAKE_HEARTH_LOG=" + log, "HEARTH_ARCHIVE_URL=file:///nonexistent/hearth.tar.gz", "HEARTH_VERSION=v0.3.0"}, bin, "--root", root)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, _ := os.ReadFile(goLog); string(got) != "install github.com/hearth-llm/hearth/cmd/hearth@v0.3.0\n" {
		t.Errorf("go ran with %q", got)
	}
	if got, _ := os.ReadFile(log); string(got) != "install --root "+root+"\n" {
		t.Errorf("hearth ran with %q", got)
	}
	if !strings.Contains(out, "building with go install") {
		t.Errorf("output does not say it fell back to go install:\n%s", out)
	}
}

func TestInstallShNothingToInstallFrom(t *testing.T) {
	goArch(t)
	if _, err := os.Stat("/usr/bin/go"); err == nil {
		t.Skip("/usr/bin/go exists: the fallback would be taken")
	}
	out, err := runInstallSh(t, nil, "", "--root", t.TempDir())
	if err == nil || !strings.Contains(out, "HEARTH_RELEASE_BASE") {
		t.Errorf("err %v, output %q: want a failure naming HEARTH_RELEASE_BASE", err, out)
	}
}
