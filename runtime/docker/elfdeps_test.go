package docker

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseLdSoConf(t *testing.T) {
	for _, tc := range []struct {
		name, text     string
		dirs, includes []string
	}{
		{"debian", "include /etc/ld.so.conf.d/*.conf\n\n", nil, []string{"/etc/ld.so.conf.d/*.conf"}},
		{"comments and blanks", "# libc default configuration\n/usr/local/lib\n  \n/opt/x/lib # vendor\n", []string{"/usr/local/lib", "/opt/x/lib"}, nil},
		{"several a line", "/a:/b,/c\t/d/\n", []string{"/a", "/b", "/c", "/d"}, nil},
		{"hwcap and relative", "hwcap 0 nosegneg\nrelative/lib\ninclude a.conf b.conf\n", nil, []string{"a.conf", "b.conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs, includes := parseLdSoConf([]byte(tc.text))
			if !slices.Equal(dirs, tc.dirs) || !slices.Equal(includes, tc.includes) {
				t.Errorf("parse(%q) = %q, %q; want %q, %q", tc.text, dirs, includes, tc.dirs, tc.includes)
			}
		})
	}
}

func FuzzParseLdSoConf(f *testing.F) {
	f.Add([]byte("include /etc/ld.so.conf.d/*.conf\n/usr/local/lib\n# c\nhwcap 1 x\n/a:/b,/c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dirs, _ := parseLdSoConf(data)
		for _, d := range dirs {
			if !filepath.IsAbs(d) || d != filepath.Clean(d) {
				t.Fatalf("directory %q is not a clean absolute path", d)
			}
		}
	})
}

func TestReadLdSoConfFollowsIncludes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "/first\ninclude ld.so.conf.d/*.conf\n")
	write("ld.so.conf.d/a.conf", "/from-a\n")
	write("ld.so.conf.d/b.conf", "/from-b\ninclude ../ld.so.conf\n") // a loop ends at the depth bound
	got := readLdSoConf(filepath.Join(dir, "ld.so.conf"), 0)
	if len(got) < 3 || !slices.Equal(got[:3], []string{"/first", "/from-a", "/from-b"}) {
		t.Errorf("dirs = %q, want /first, /from-a, /from-b first", got)
	}
}

// The test binary is linked as the default build of hearth is: its loader
// and libc come out of its headers, resolved on this host, and a file of
// the library's name that is no ELF object is passed over.
func TestFindRuntimeFilesOfThisBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := f.ImportedLibraries()
	machine := f.Machine
	f.Close()
	if !slices.Contains(libs, "libc.so.6") {
		t.Skipf("skipped: this test binary does not link glibc (libraries %q; built without cgo?)", libs)
	}
	decoy := t.TempDir()
	if err := os.WriteFile(filepath.Join(decoy, "libc.so.6"), []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := searchConfig{ldSoConf: "/etc/ld.so.conf", builtin: func(m elf.Machine) []string {
		return append([]string{decoy}, builtinLibDirs(m)...)
	}}
	got, err := findRuntimeFiles(exe, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Interpreter == "" || !strings.Contains(filepath.Base(got.Interpreter), "ld-") {
		t.Errorf("interpreter = %q", got.Interpreter)
	}
	var libc string
	for _, l := range got.Libraries {
		if filepath.Base(l) == "libc.so.6" {
			libc = l
		}
		lf, err := elf.Open(l)
		if err != nil {
			t.Errorf("%s: %v", l, err)
			continue
		}
		if lf.Machine != machine {
			t.Errorf("%s is for %v, the binary for %v", l, lf.Machine, machine)
		}
		lf.Close()
	}
	if libc == "" || strings.HasPrefix(libc, decoy) {
		t.Errorf("libc resolved to %q (libraries %q)", libc, got.Libraries)
	}
	if slices.Contains(got.Libraries, got.Interpreter) {
		t.Errorf("the interpreter is listed among the libraries too: %q", got.Libraries)
	}
}

func TestFindRuntimeFilesRefusesNonELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findRuntimeFiles(p, hostSearch); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("err = %v", err)
	}
}
