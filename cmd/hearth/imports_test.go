package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hearth-llm/hearth"

// allowedHearthImports says, per top-level package, which other Hearth
// packages it may import directly (docs/ARCHITECTURE.md, "Import layering").
// A package may always import its own subpackages. cmd is absent: it may
// import everything. daemon, the composition of hearth up, may import the
// console; no package but cmd imports daemon.
var allowedHearthImports = map[string][]string{
	"api":        {"router", "tokenizer", "runtime", "apikey", "netguard"},
	"tokenizer":  {},
	"kvevents":   {},
	"router":     {"tokenizer", "kvtier", "kvevents", "zmtp"},
	"kvbm":       {},
	"kvtier":     {"kvevents"},
	"runtime":    {"tokenizer", "kvevents", "catalog", "netguard", "zmtp"},
	"nodes":      {"catalog"},
	"console":    {"assets", "apikey"},
	"bench":      {"router", "runtime", "tokenizer", "kvbm", "kvtier", "kvevents", "catalog"},
	"assets":     {},
	"installer":  {},
	"catalog":    {"tokenizer"},
	"clock":      {},
	"atomicfile": {},
	"tlsca":      {"pki"},
	"pki":        {},
	"apikey":     {},
	"cluster":    {"router", "kvevents", "kvtier", "tokenizer", "zmtp", "pki", "netguard"},
	"zmtp":       {},
	"adminapi":   {},
	"netguard":   {},
	"daemon":     {"adminapi", "api", "apikey", "catalog", "cluster", "console", "installer", "kvbm", "kvtier", "nodes", "router", "runtime", "tlsca", "tokenizer"},
}

// importedOnlyBy names top-level packages that only cmd and the packages
// listed may import: the admin API is the daemon's and the command line's.
var importedOnlyBy = map[string][]string{
	"adminapi": {"daemon"},
}

// importedByAll are top-level packages every package may import: leaves
// that hold one shared concept (the clock of code with timers, the one
// atomic, durable file writer).
var importedByAll = []string{"clock", "atomicfile"}

// confinedModules names third-party modules that only some packages may
// import directly, so that heavy SDKs and cgo stay at the edges.
var confinedModules = []struct {
	prefix  string
	allowed []string // package path prefixes, relative to the module
}{
	{"github.com/docker/docker", []string{"runtime/docker", "cmd/"}},
	{"github.com/moby/", []string{"runtime/docker", "cmd/", "daemon"}},
	{"github.com/NVIDIA/go-nvml", []string{"nodes"}},
	{"github.com/gofiber/", []string{"api", "console", "adminapi", "cmd/", "daemon"}},
	{"github.com/a-h/templ", []string{"console", "cmd/"}},
	{"github.com/nats-io/", []string{"cluster"}},
	{"github.com/grandcat/zeroconf", []string{"cluster"}},
}

// listedImports is the output of go list over the module: per package
// (relative to the module), its direct imports, tests included. It is
// listed once per test binary.
var listedImports = sync.OnceValues(func() (map[string][]string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, errNoGo
	}
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		imports[pkg] = fields[1:]
	}
	return imports, sc.Err()
})

var errNoGo = errors.New("the go command is not on PATH, so packages cannot be listed")

func packageImports(t *testing.T) map[string][]string {
	t.Helper()
	imports, err := listedImports()
	if errors.Is(err, errNoGo) {
		t.Skip("skipping:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// TestImportRules checks the direct imports of every package (tests
// included) against the layering rules of docs/ARCHITECTURE.md.
func TestImportRules(t *testing.T) {
	imports := packageImports(t)
	for pkg, imps := range imports {
		for _, imp := range imps {
			if msg := checkImport(pkg, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
	}
	if len(imports) < len(allowedHearthImports) {
		t.Fatalf("go list found %d packages, want at least %d", len(imports), len(allowedHearthImports))
	}
}

// TestImportRulesAreTight checks that every import a rule allows is made:
// a rule looser than the code hides the real layering from its readers.
func TestImportRulesAreTight(t *testing.T) {
	used := usedHearthImports(packageImports(t))
	for top, allowed := range allowedHearthImports {
		for _, a := range allowed {
			if !used[top][a] {
				t.Errorf("%s may import %s but no package of %s does: remove it from allowedHearthImports and docs/ARCHITECTURE.md", top, a, top)
			}
		}
	}
}

// usedHearthImports is, per top-level package, the other top-level Hearth
// packages its packages import (tests included), leaving out what every
// package may import.
func usedHearthImports(imports map[string][]string) map[string]map[string]bool {
	used := map[string]map[string]bool{}
	for pkg, imps := range imports {
		top, _, _ := strings.Cut(pkg, "/")
		for _, imp := range imps {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			impTop, _, _ := strings.Cut(rel, "/")
			if impTop == top || slices.Contains(importedByAll, impTop) {
				continue
			}
			if used[top] == nil {
				used[top] = map[string]bool{}
			}
			used[top][impTop] = true
		}
	}
	return used
}

// TestArchitectureDocMatchesRules reads the import table of
// docs/ARCHITECTURE.md and checks it says what allowedHearthImports says.
func TestArchitectureDocMatchesRules(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := importTable(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for top, allowed := range allowedHearthImports {
		listed, ok := table[top]
		if !ok {
			t.Errorf("docs/ARCHITECTURE.md's import table has no row for %s", top)
			continue
		}
		want := slices.Sorted(slices.Values(allowed))
		if !slices.Equal(listed, want) {
			t.Errorf("docs/ARCHITECTURE.md says %s may import %v; allowedHearthImports says %v", top, listed, want)
		}
	}
	for top := range table {
		if _, ok := allowedHearthImports[top]; !ok && top != "cmd" {
			t.Errorf("docs/ARCHITECTURE.md's import table has a row for %s, which has no rule", top)
		}
	}
}

// importTable parses the table under "## Import layering": rows of
// "| `pkg` | a, b |", where "nothing" stands for none. The result's lists
// are sorted.
func importTable(doc string) (map[string][]string, error) {
	_, section, ok := strings.Cut(doc, "\n## Import layering\n")
	if !ok {
		return nil, errors.New("docs/ARCHITECTURE.md has no section \"## Import layering\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	table := map[string][]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		top := strings.Trim(strings.TrimSpace(cells[1]), "`")
		top = strings.TrimSuffix(top, "/...")
		var list []string
		for _, name := range strings.Split(cells[2], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			if name != "" && name != "nothing" && name != "everything" {
				list = append(list, name)
			}
		}
		slices.Sort(list)
		table[top] = list
	}
	if len(table) == 0 {
		return nil, errors.New("docs/ARCHITECTURE.md: no rows in the import table")
	}
	return table, nil
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
	case importedOnlyBy[impTop] != nil && !slices.Contains(importedOnlyBy[impTop], top):
		return "only cmd and " + strings.Join(importedOnlyBy[impTop], ", ") + " may import " + impTop
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
		{"kvtier reads kv event media", "kvtier", module + "/kvevents", true},
		{"the router names tiers without the block store", "router", module + "/kvbm", false},
		{"kvevents stays standalone", "kvevents", module + "/kvbm", false},
		{"nvml outside nodes", "router", "github.com/NVIDIA/go-nvml/pkg/nvml", false},
		{"nvml inside nodes", "nodes", "github.com/NVIDIA/go-nvml/pkg/nvml", true},
		{"docker outside its package", "runtime", "github.com/docker/docker/client", false},
		{"docker in runtime/docker", "runtime/docker", "github.com/docker/docker/client", true},
		{"fiber in router", "router", "github.com/gofiber/fiber/v2", false},
		{"std is free", "tokenizer", "encoding/json", true},
		{"everyone may use the clock", "tokenizer", module + "/clock", true},
		{"the clock stays a leaf", "clock", module + "/tokenizer", false},
		{"the installer writes files atomically", "installer", module + "/atomicfile", true},
		{"the file writer stays a leaf", "atomicfile", module + "/pki", false},
		{"installer reads hearth through its own interfaces", "installer", module + "/nodes", false},
		{"nats inside cluster", "cluster", "github.com/nats-io/nats-server/v2/server", true},
		{"nats outside cluster", "router", "github.com/nats-io/nats.go", false},
		{"mdns outside cluster", "cmd/hearth", "github.com/grandcat/zeroconf", false},
		{"cmd uses the admin API's client", "cmd/hearth", module + "/adminapi", true},
		{"the console does not reach the admin API", "console", module + "/adminapi", false},
		{"the admin API reads the daemon through its own interfaces", "adminapi", module + "/runtime", false},
		{"the admin API serves with fiber", "adminapi", "github.com/gofiber/fiber/v2", true},
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
