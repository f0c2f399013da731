package docker

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// runtimeFiles are what a dynamically linked executable needs besides
// itself to run in an image FROM scratch, found on this host as its
// dynamic loader would find them.
type runtimeFiles struct {
	// Interpreter is the loader PT_INTERP names ("" for a static
	// executable), at the path the kernel opens.
	Interpreter string
	// Libraries are the shared objects DT_NEEDED names, recursively, each
	// at the path where it was found: the image holds it at that path.
	Libraries []string
}

// searchConfig is where shared libraries are looked for after an object's
// own RPATH or RUNPATH: the directories of /etc/ld.so.conf (which
// ldconfig's cache indexes), then the loader's built-in ones.
type searchConfig struct {
	ldSoConf string // "" reads none
	builtin  func(machine elf.Machine) []string
}

var hostSearch = searchConfig{ldSoConf: "/etc/ld.so.conf", builtin: builtinLibDirs}

// builtinLibDirs are the directories glibc's loader searches without a
// cache, with Debian's multiarch directories first.
func builtinLibDirs(machine elf.Machine) []string {
	var dirs []string
	if triplet, ok := multiarchTriplets[machine]; ok {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

var multiarchTriplets = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_386:     "i386-linux-gnu",
	elf.EM_ARM:     "arm-linux-gnueabihf",
	elf.EM_PPC64:   "powerpc64le-linux-gnu",
	elf.EM_S390:    "s390x-linux-gnu",
	elf.EM_RISCV:   "riscv64-linux-gnu",
}

// findRuntimeFiles reads the ELF headers of the executable at path and
// resolves its interpreter and its shared libraries, those of its
// libraries too, through each object's RPATH/RUNPATH ($ORIGIN expanded),
// then cfg's directories. A library that matches by name but not by class
// or machine (a 32-bit one in /lib) is passed over, as the loader does.
func findRuntimeFiles(path string, cfg searchConfig) (runtimeFiles, error) {
	exe, err := elf.Open(path)
	if err != nil {
		return runtimeFiles{}, fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer exe.Close()
	var rf runtimeFiles
	for _, p := range exe.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return runtimeFiles{}, fmt.Errorf("%s: reading its interpreter: %w", path, err)
		}
		rf.Interpreter = string(bytes.TrimRight(b, "\x00"))
	}
	var confDirs []string
	if cfg.ldSoConf != "" {
		confDirs = readLdSoConf(cfg.ldSoConf, 0)
	}
	system := append(confDirs, cfg.builtin(exe.Machine)...)

	type object struct {
		file *elf.File
		path string
	}
	queue := []object{{exe, path}}
	found := map[string]bool{} // by DT_NEEDED name
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		needed, err := obj.file.DynString(elf.DT_NEEDED)
		if err != nil {
			return runtimeFiles{}, fmt.Errorf("%s: %w", obj.path, err)
		}
		dirs := objectSearchPath(obj.file, obj.path)
		for _, name := range needed {
			if found[name] {
				continue
			}
			found[name] = true
			lib, f, err := resolveLibrary(name, append(dirs, system...), exe.Class, exe.Machine)
			if err != nil {
				return runtimeFiles{}, fmt.Errorf("%s needs %s: %w", obj.path, name, err)
			}
			if lib == rf.Interpreter || sameFile(lib, rf.Interpreter) {
				// libc's DT_NEEDED names the loader; it is in the image.
				f.Close()
				continue
			}
			rf.Libraries = append(rf.Libraries, lib)
			queue = append(queue, object{f, lib})
		}
		if obj.file != exe {
			obj.file.Close()
		}
	}
	return rf, nil
}

// objectSearchPath is an object's own library path: DT_RUNPATH, or
// DT_RPATH when it has no RUNPATH, with $ORIGIN as the object's directory.
func objectSearchPath(f *elf.File, path string) []string {
	paths, _ := f.DynString(elf.DT_RUNPATH)
	if len(paths) == 0 {
		paths, _ = f.DynString(elf.DT_RPATH)
	}
	origin := filepath.Dir(path)
	var dirs []string
	for _, p := range paths {
		for _, d := range strings.Split(p, ":") {
			d = strings.NewReplacer("${ORIGIN}", origin, "$ORIGIN", origin).Replace(d)
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// resolveLibrary finds the library name (a file name, or a path when it
// holds a slash) in dirs, the first of the executable's class and machine.
func resolveLibrary(name string, dirs []string, class elf.Class, machine elf.Machine) (string, *elf.File, error) {
	candidates := []string{name}
	if !strings.Contains(name, "/") {
		candidates = candidates[:0]
		for _, d := range dirs {
			candidates = append(candidates, filepath.Join(d, name))
		}
	}
	for _, c := range candidates {
		f, err := elf.Open(c)
		if err != nil {
			continue
		}
		if f.Class == class && f.Machine == machine {
			return c, f, nil
		}
		f.Close()
	}
	return "", nil, fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// readLdSoConf returns the directories the ld.so.conf file at path lists,
// following its include lines (globs, relative to the file's directory).
// A file that cannot be read lists none: the built-in directories remain.
func readLdSoConf(path string, depth int) []string {
	data, err := os.ReadFile(path)
	if err != nil || depth > 8 {
		return nil
	}
	dirs, includes := parseLdSoConf(data)
	for _, inc := range includes {
		if !filepath.IsAbs(inc) {
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		matches, _ := filepath.Glob(inc)
		for _, m := range matches {
			dirs = append(dirs, readLdSoConf(m, depth+1)...)
		}
	}
	return dirs
}

// parseLdSoConf splits an ld.so.conf text into its directories and its
// include patterns, in order. Comments (#) and hwcap lines are dropped;
// a line may list several directories, separated by spaces, tabs, colons
// or commas, as ldconfig reads them.
func parseLdSoConf(data []byte) (dirs, includes []string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t:,", r) })
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "include":
			includes = append(includes, fields[1:]...)
		case "hwcap":
		default:
			for _, f := range fields {
				if strings.HasPrefix(f, "/") {
					dirs = append(dirs, filepath.Clean(f))
				}
			}
		}
	}
	// A line too long for the scanner ends the reading: what came before
	// it stands, as a partial list only narrows the search.
	return dirs, includes
}
