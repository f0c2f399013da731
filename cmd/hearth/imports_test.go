package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hearth-llm/hearth"

// allowedHearthImports says, per top-level package, which other Hearth
// packages it may import directly (docs/ARCHITECTURE.md, "Import layering").
// A package may always import its own subpackages. cmd is absent: it may
// import everything. daemon, the composition of hearth up, may import the
// console; no package but cmd imports daemon.
var allowedHearthImports = map[string][]string{
	"api":       {"router", "tokenizer", "kvbm", "runtime", "nodes", "catalog"},
	"tokenizer": {},
	"kvevents":  {},
	"router":    {"tokenizer", "kvbm", "kvevents", "zmtp"},
	"kvbm":      {"kvevents"},
	"runtime":   {"tokenizer", "kvevents", "catalog"},
	"nodes":     {"catalog"},
	"console":   {"assets"},
	"bench":     {"router", "runtime", "tokenizer", "kvbm", "kvevents", "catalog"},
	"assets":    {},
	"installer": {},
	"catalog":   {},
	"clock":     {},
	"tlsca":     {},
	"cluster":   {"router", "kvevents", "kvbm", "tokenizer", "zmtp"},
	"zmtp":      {},
	"daemon":    {"api", "catalog", "cluster", "console", "installer", "kvbm", "nodes", "router", "runtime", "tlsca", "tokenizer"},
}

// importedByAll are top-level packages every package may import: leaves
// that hold one shared concept (the clock of code with timers).
var importedByAll = []string{"clock"}

// confinedModules names third-party modules that only some packages may
// import directly, so that heavy SDKs and cgo stay at the edges.
var confinedModules = []struct {
	prefix  string
	allowed []string // package path prefixes, relative to the module
}{
	{"github.com/docker/docker", []string{"runtime/docker", "cmd/"}},
	{"github.com/moby/", []string{"runtime/docker", "cmd/", "daemon"}},
	{"github.com/NVIDIA/go-nvml", []string{"nodes"}},
	{"github.com/gofiber/", []string{"api", "console", "cmd/", "daemon"}},
	{"github.com/a-h/templ", []string{"console", "cmd/"}},
}

// TestImportRules checks the direct imports of every package (tests
// included) against the layering rules of docs/ARCHITECTURE.md.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: the go command is not on PATH, so packages cannot be listed")
	}
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	packages := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		packages++
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		for _, imp := range fields[1:] {
			if msg := checkImport(pkg, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
	}
	if packages < len(allowedHearthImports) {
		t.Fatalf("go list found %d packages, want at least %d", packages, len(allowedHearthImports))
	}
}

// checkImport returns why pkg (relative to the module) must not import imp,
// or "" when it may.
func checkImport(pkg, imp string) string {
	top, _, _ := strings.Cut(pkg, "/")
	for _, c := range confinedModules {
		if strings.HasPrefix(imp, c.prefix) && !hasAnyPrefix(pkg, c.allowed) {
			return "only " + strings.Join(c.allowed, ", ") + " may use this module"
		}
	}
	rel, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return ""
	}
	impTop, _, _ := strings.Cut(rel, "/")
	switch {
	case top == "cmd" || impTop == top:
		return ""
	case impTop == "daemon":
		return "no package but cmd imports daemon"
	case impTop == "console" && top == "daemon":
		return ""
	case impTop == "cmd" || impTop == "console" || impTop == "bench":
		return "no package imports cmd, console or bench"
	case slices.Contains(importedByAll, impTop):
		return ""
	}
	allowed, known := allowedHearthImports[top]
	if !known {
		return "top-level package " + top + " has no import rule in docs/ARCHITECTURE.md; add one here"
	}
	for _, a := range allowed {
		if impTop == a {
			return ""
		}
	}
	return top + " may import only " + strings.Join(allowed, ", ")
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func TestCheckImport(t *testing.T) {
	cases := []struct {
		name, pkg, imp string
		wantOK         bool
	}{
		{"router uses tokenizer", "router", module + "/tokenizer", true},
		{"router must not use api", "router", module + "/api", false},
		{"nobody imports console", "api", module + "/console", false},
		{"cmd imports everything", "cmd/hearth", module + "/console", true},
		{"subpackage of own tree", "runtime/sim", module + "/runtime", true},
		{"sim uses tokenizer", "runtime/sim", module + "/tokenizer", true},
		{"tokenizer stays standalone", "tokenizer", module + "/router", false},
		{"bench uses the sim engine", "bench", module + "/runtime/sim", true},
		{"sim reads the catalog", "runtime/sim", module + "/catalog", true},
		{"nodes reads the catalog", "nodes", module + "/catalog", true},
		{"catalog stays standalone", "catalog", module + "/nodes", false},
		{"router needs no catalog", "router", module + "/catalog", false},
		{"router reads kv events", "router", module + "/kvevents", true},
		{"sim publishes kv events", "runtime/sim", module + "/kvevents", true},
		{"kvbm reads kv events", "kvbm", module + "/kvevents", true},
		{"kvevents stays standalone", "kvevents", module + "/kvbm", false},
		{"nvml outside nodes", "router", "github.com/NVIDIA/go-nvml/pkg/nvml", false},
		{"nvml inside nodes", "nodes", "github.com/NVIDIA/go-nvml/pkg/nvml", true},
		{"docker outside its package", "runtime", "github.com/docker/docker/client", false},
		{"docker in runtime/docker", "runtime/docker", "github.com/docker/docker/client", true},
		{"fiber in router", "router", "github.com/gofiber/fiber/v2", false},
		{"std is free", "tokenizer", "encoding/json", true},
		{"everyone may use the clock", "tokenizer", module + "/clock", true},
		{"the clock stays a leaf", "clock", module + "/tokenizer", false},
		{"installer reads hearth through its own interfaces", "installer", module + "/nodes", false},
		{"the daemon mounts the console", "daemon", module + "/console", true},
		{"nobody but cmd imports the daemon", "api", module + "/daemon", false},
		{"cmd imports the daemon", "cmd/hearth", module + "/daemon", true},
		{"the daemon is no bench", "daemon", module + "/bench", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := checkImport(tc.pkg, tc.imp)
			if (msg == "") != tc.wantOK {
				t.Errorf("checkImport(%q, %q) = %q, want ok=%v", tc.pkg, tc.imp, msg, tc.wantOK)
			}
		})
	}
}
