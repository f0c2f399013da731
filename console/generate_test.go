package console

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTemplGeneratedCurrent regenerates the components into a scratch
// directory with the pinned templ (go tool templ) and compares them with
// the committed *_templ.go files.
func TestTemplGeneratedCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not running go tool templ")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run templ with")
	}
	sources, err := filepath.Glob(filepath.Join("components", "*.templ"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no templ sources: %v", err)
	}
	// The same layout as ./console, so that file names embedded in the
	// generated code match.
	root := t.TempDir()
	scratch := filepath.Join(root, "components")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scratch, filepath.Base(src)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "tool", "templ", "generate", "-path", root)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("templ generate: %v\n%s", err, out)
	}
	for _, src := range sources {
		name := filepath.Base(src)
		name = name[:len(name)-len(".templ")] + "_templ.go"
		want, err := os.ReadFile(filepath.Join(scratch, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("components", name))
		if err != nil {
			t.Fatalf("%v (run go tool templ generate -path ./console)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("components/%s is stale: run go tool templ generate -path ./console", name)
		}
	}
}
