package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hearth-llm/hearth"

// allowedHearthImports says, per top-level package, which other Hearth
// packages its production code (the tree: the package and its
// subpackages, test files left out) may import directly
// (docs/ARCHITECTURE.md, "Import layering"). A rule names top-level
// packages, which cover their subpackages; it may also name a subpackage
// of its own tree, which its other packages may then import (see
// checkWithinTree). cmd is absent: it may import everything. daemon, the
// composition of hearth up, may import the console; no package but cmd
// imports daemon.
var allowedHearthImports = map[string][]string{
	"api":         {"api/store", "router", "tokenizer", "apikey", "netguard"},
	"tokenizer":   {},
	"kvevents":    {},
	"router":      {"tokenizer", "kvtier", "kvevents", "zmtp"},
	"kvbm":        {},
	"kvtier":      {"kvevents"},
	"runtime":     {"tokenizer", "kvevents", "catalog", "netguard"},
	"nodes":       {"catalog"},
	"console":     {"console/components", "assets", "apikey", "agentclient"},
	"bench":       {"router", "runtime", "tokenizer", "kvbm", "kvevents", "catalog", "agentclient", "models"},
	"assets":      {},
	"installer":   {},
	"catalog":     {"tokenizer"},
	"clock":       {},
	"atomicfile":  {},
	"tlsca":       {"pki"},
	"pki":         {},
	"apikey":      {},
	"cluster":     {"router", "kvevents", "zmtp", "pki", "netguard"},
	"zmtp":        {},
	"adminapi":    {},
	"agentclient": {},
	"netguard":    {},
	"scripts":     {},
	"models":      {},
	"daemon":      {"adminapi", "agentclient", "api", "apikey", "catalog", "cluster", "console", "installer", "kvbm", "models", "nodes", "router", "runtime", "tlsca", "tokenizer"},
}

// allowedTestImports says, per top-level package, which other top-level
// Hearth packages its tests may import beyond what its production code
// may: a test may drive a real neighbour (the gateway's tests a simulated
// engine, the cluster's a router fed by real tokens). Tests may also
// import any package of their own tree.
var allowedTestImports = map[string][]string{
	"api":     {"runtime"},
	"runtime": {"zmtp"},
	"bench":   {"kvtier"},
	"cluster": {"kvtier", "tokenizer"},
	"daemon":  {"kvtier"},
}

// subpackageImports are the rules of subpackages whose docs promise more
// than their tree's rule: each may import, in production, only the Hearth
// packages listed (top-level names cover their subpackages; its own tree's
// packages, its parent included, must be listed too). A subpackage without
// an entry follows its tree's rule and checkWithinTree.
var subpackageImports = map[string][]string{
	"api/store":           {"apikey"},        // knows no HTTP or client protocol shapes
	"router/osl":          {},                // neither routes nor talks HTTP
	"router/warm":         {},                // learns prefixes; no I/O
	"runtime/process":     {"runtime"},       // one runtime knows no other
	"runtime/docker":      {"runtime"},       // one runtime knows no other
	"runtime/conformance": {},                // tests only
	"console/components":  {},                // layout, no I/O
	"installer/doctor":    {"installer/wsl"}, // reads Hearth through its own interfaces
	"installer/wsl":       {},                // reads files, runs wslinfo
	"installer/config":    {},                // knows no flag by name
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

// imports are one package's direct imports, as import paths: those of
// its production files and those its tests add (in-package and external
// test files together).
type imports struct {
	prod, test []string
}

// listedImports is the output of go list over the module: per package
// (relative to the module), its direct imports. It is listed once per
// test binary.
var listedImports = sync.OnceValues(func() (map[string]imports, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, errNoGo
	}
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	listed := map[string]imports{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "|")
		if len(fields) != 3 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		listed[pkg] = imports{prod: strings.Fields(fields[1]), test: strings.Fields(fields[2])}
	}
	return listed, sc.Err()
})

var errNoGo = errors.New("the go command is not on PATH, so packages cannot be listed")

func packageImports(t *testing.T) map[string]imports {
	t.Helper()
	listed, err := listedImports()
	if errors.Is(err, errNoGo) {
		t.Skip("skipping:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return listed
}

// TestImportRules checks the direct imports of every package against the
// layering rules of docs/ARCHITECTURE.md: its production files' imports
// against the rules of what ships, its tests' against those of tests.
func TestImportRules(t *testing.T) {
	listed := packageImports(t)
	for pkg, imps := range listed {
		for _, imp := range imps.prod {
			if msg := checkImport(pkg, imp, false); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
		for _, imp := range imps.test {
			if msg := checkImport(pkg, imp, true); msg != "" {
				t.Errorf("%s's tests import %s: %s", pkg, imp, msg)
			}
		}
	}
	if len(listed) < len(allowedHearthImports) {
		t.Fatalf("go list found %d packages, want at least %d", len(listed), len(allowedHearthImports))
	}
	for pkg := range subpackageImports {
		if _, ok := listed[pkg]; !ok {
			t.Errorf("subpackageImports has a rule for %s, which is no package", pkg)
		}
	}
}

// TestImportRulesAreTight checks that every import a rule allows is made:
// a rule looser than the code hides the real layering from its readers.
// A production rule must be used by production code, a test rule by tests
// (and not already be a production rule).
func TestImportRulesAreTight(t *testing.T) {
	listed := packageImports(t)
	prod, test := usedHearthImports(listed)
	for top, allowed := range allowedHearthImports {
		for _, a := range allowed {
			if !prod[top][a] {
				t.Errorf("%s may import %s but no production code of %s does: remove it from allowedHearthImports and docs/ARCHITECTURE.md", top, a, top)
			}
		}
	}
	for top, allowed := range allowedTestImports {
		for _, a := range allowed {
			switch {
			case slices.Contains(allowedHearthImports[top], a):
				t.Errorf("%s's tests may import %s, which its production code may import anyway: remove it from allowedTestImports and docs/ARCHITECTURE.md", top, a)
			case !test[top][a]:
				t.Errorf("%s's tests may import %s but none does: remove it from allowedTestImports and docs/ARCHITECTURE.md", top, a)
			}
		}
	}
	for pkg, allowed := range subpackageImports {
		for _, a := range allowed {
			if !slices.ContainsFunc(listed[pkg].prod, func(imp string) bool { return subpackageAllows(pkg, a, strings.TrimPrefix(imp, module+"/")) }) {
				t.Errorf("%s may import %s but does not: remove it from subpackageImports and docs/ARCHITECTURE.md", pkg, a)
			}
		}
	}
}

// usedHearthImports is, per top-level package, what its production code
// and its tests import of other trees (top-level names) and of its own
// tree's subpackages that a rule must name (see checkWithinTree), leaving
// out what every package may import.
func usedHearthImports(listed map[string]imports) (prod, test map[string]map[string]bool) {
	prod, test = map[string]map[string]bool{}, map[string]map[string]bool{}
	note := func(used map[string]map[string]bool, top, name string) {
		if used[top] == nil {
			used[top] = map[string]bool{}
		}
		used[top][name] = true
	}
	for pkg, imps := range listed {
		top, _, _ := strings.Cut(pkg, "/")
		for _, imp := range imps.prod {
			if name, ok := ruleName(pkg, imp); ok {
				note(prod, top, name)
			}
		}
		for _, imp := range imps.test {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if impTop, _, _ := strings.Cut(rel, "/"); ok && impTop != top && !slices.Contains(importedByAll, impTop) {
				note(test, top, impTop)
			}
		}
	}
	return prod, test
}

// ruleName is the name under which a production import of pkg appears in
// its tree's rule: the top-level package of another tree, or a subpackage
// of its own tree that is not one of pkg's ancestors. ok is false for what
// needs no rule.
func ruleName(pkg, imp string) (string, bool) {
	rel, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return "", false
	}
	top, _, _ := strings.Cut(pkg, "/")
	impTop, _, _ := strings.Cut(rel, "/")
	switch {
	case slices.Contains(importedByAll, impTop):
		return "", false
	case impTop != top:
		return impTop, true
	case covers(rel, pkg):
		return "", false // an ancestor
	}
	return rel, true
}

// TestArchitectureDocMatchesRules reads the import tables of
// docs/ARCHITECTURE.md and checks they say what the rules say.
func TestArchitectureDocMatchesRules(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := importTables(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		table map[string][]string
		rules map[string][]string
		extra func(string) bool // rows the table may hold without a rule
	}{
		{"may import", tables.prod, allowedHearthImports, func(row string) bool { return row == "cmd" }},
		{"its tests may also import", tables.test, allowedTestImports, func(row string) bool { _, ok := allowedHearthImports[row]; return ok || row == "cmd" }},
		{"subpackage may import", tables.sub, subpackageImports, func(string) bool { return false }},
	} {
		for pkg, allowed := range c.rules {
			listed, ok := c.table[pkg]
			if !ok {
				t.Errorf("docs/ARCHITECTURE.md's import tables have no row for %s (%s)", pkg, c.what)
				continue
			}
			if want := slices.Sorted(slices.Values(allowed)); !slices.Equal(listed, want) {
				t.Errorf("docs/ARCHITECTURE.md says %s: %s %v; the rules say %v", pkg, c.what, listed, want)
			}
		}
		for pkg, listed := range c.table {
			if _, ok := c.rules[pkg]; !ok && !(c.extra(pkg) && len(listed) == 0) {
				t.Errorf("docs/ARCHITECTURE.md says %s: %s %v, which no rule says", pkg, c.what, listed)
			}
		}
	}
}

// docTables are the import tables of docs/ARCHITECTURE.md, their lists
// sorted: per top-level package what its production code and what its
// tests may also import, and per subpackage with a rule of its own what it
// may import.
type docTables struct {
	prod, test, sub map[string][]string
}

// importTables parses the tables under "## Import layering": rows of
// "| `pkg` | a, b | c |" (top-level packages: production, tests) and
// "| `pkg/sub` | a, b |" (subpackages), where "nothing" and "everything"
// stand for no list.
func importTables(doc string) (docTables, error) {
	_, section, ok := strings.Cut(doc, "\n## Import layering\n")
	if !ok {
		return docTables{}, errors.New("docs/ARCHITECTURE.md has no section \"## Import layering\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	tables := docTables{prod: map[string][]string{}, test: map[string][]string{}, sub: map[string][]string{}}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		pkg := strings.TrimSuffix(strings.Trim(strings.TrimSpace(cells[1]), "`"), "/...")
		switch len(cells) {
		case 5:
			tables.prod[pkg] = cellList(cells[2])
			if test := cellList(cells[3]); len(test) > 0 {
				tables.test[pkg] = test
			}
		case 4:
			tables.sub[pkg] = cellList(cells[2])
		}
	}
	if len(tables.prod) == 0 || len(tables.sub) == 0 {
		return docTables{}, errors.New("docs/ARCHITECTURE.md: no rows in the import tables")
	}
	return tables, nil
}

// cellList reads "a, `b`, c" as a sorted list; "nothing", "everything"
// and "" are none.
func cellList(cell string) []string {
	var list []string
	for _, name := range strings.Split(cell, ",") {
		name = strings.Trim(strings.TrimSpace(name), "`")
		if name != "" && name != "nothing" && name != "everything" {
			list = append(list, name)
		}
	}
	slices.Sort(list)
	return list
}

// checkImport returns why pkg (relative to the module) must not import imp
// from its production code (test false) or from its tests (test true), or
// "" when it may.
func checkImport(pkg, imp string, test bool) string {
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
	if !test && isTestHelper(rel) && !covers(rel, pkg) {
		return rel + " is a test helper: only tests import it"
	}
	if top == "cmd" {
		return ""
	}
	if allowed, ok := subpackageImports[pkg]; ok && !test {
		if slices.Contains(importedByAll, impTop) || slices.ContainsFunc(allowed, func(a string) bool { return subpackageAllows(pkg, a, rel) }) {
			return ""
		}
		return pkg + " may import only " + listOrNothing(allowed)
	}
	if impTop == top {
		return checkWithinTree(pkg, rel, test)
	}
	switch {
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
	if slices.Contains(allowed, impTop) || test && slices.Contains(allowedTestImports[top], impTop) {
		return ""
	}
	if test {
		return top + "'s tests may import only " + listOrNothing(append(slices.Clone(allowed), allowedTestImports[top]...))
	}
	return top + " may import only " + listOrNothing(allowed)
}

// checkWithinTree judges an import inside one tree: a package builds on
// its ancestors (router/ingest on router, runtime/sim/simcli on
// runtime/sim) and knows neither its subpackages nor its siblings (router
// does not import router/ingest, runtime none of its runtimes, one runtime
// no other), unless the tree's rule names the subpackage as a part the
// tree is made of (api/store). Tests may import their whole tree: the
// supervisor's drive the simulated runtime.
func checkWithinTree(pkg, rel string, test bool) string {
	top, _, _ := strings.Cut(pkg, "/")
	if test || covers(rel, pkg) || slices.Contains(allowedHearthImports[top], rel) {
		return ""
	}
	return pkg + " imports only its ancestors of its own tree, and the subpackages its tree's rule names"
}

// subpackageAllows reports whether the entry a of pkg's subpackageImports
// allows importing rel: a package of another tree covers its subpackages,
// one of pkg's own tree only itself (runtime/docker's "runtime" is not
// runtime/sim).
func subpackageAllows(pkg, a, rel string) bool {
	top, _, _ := strings.Cut(pkg, "/")
	if aTop, _, _ := strings.Cut(a, "/"); aTop == top {
		return rel == a
	}
	return covers(a, rel)
}

// isTestHelper reports whether a package exists for tests (its name ends
// in "test": dockertest, nvmltest, netguardtest, daemontest).
func isTestHelper(rel string) bool {
	return strings.HasSuffix(path.Base(rel), "test")
}

// covers reports whether the rule name a covers the package rel: it is
// rel or one of rel's ancestors.
func covers(a, rel string) bool {
	return rel == a || strings.HasPrefix(rel, a+"/")
}

func listOrNothing(list []string) string {
	if len(list) == 0 {
		return "nothing of Hearth's"
	}
	return strings.Join(list, ", ")
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
		test           bool // the import is a test's
	}{
		{"router uses tokenizer", "router", module + "/tokenizer", true, false},
		{"router must not use api", "router", module + "/api", false, false},
		{"nobody imports console", "api", module + "/console", false, false},
		{"cmd imports everything", "cmd/hearth", module + "/console", true, false},
		{"subpackage of own tree", "runtime/sim", module + "/runtime", true, false},
		{"sim uses tokenizer", "runtime/sim", module + "/tokenizer", true, false},
		{"tokenizer stays standalone", "tokenizer", module + "/router", false, false},
		{"bench uses the sim engine", "bench", module + "/runtime/sim", true, false},
		{"sim reads the catalog", "runtime/sim", module + "/catalog", true, false},
		{"nodes reads the catalog", "nodes", module + "/catalog", true, false},
		{"catalog stays standalone", "catalog", module + "/nodes", false, false},
		{"router needs no catalog", "router", module + "/catalog", false, false},
		{"router reads kv events", "router", module + "/kvevents", true, false},
		{"sim publishes kv events", "runtime/sim", module + "/kvevents", true, false},
		{"kvtier reads kv event media", "kvtier", module + "/kvevents", true, false},
		{"the router names tiers without the block store", "router", module + "/kvbm", false, false},
		{"kvevents stays standalone", "kvevents", module + "/kvbm", false, false},
		{"nvml outside nodes", "router", "github.com/NVIDIA/go-nvml/pkg/nvml", false, false},
		{"nvml inside nodes", "nodes", "github.com/NVIDIA/go-nvml/pkg/nvml", true, false},
		{"docker outside its package", "runtime", "github.com/docker/docker/client", false, false},
		{"docker in runtime/docker", "runtime/docker", "github.com/docker/docker/client", true, false},
		{"fiber in router", "router", "github.com/gofiber/fiber/v2", false, false},
		{"std is free", "tokenizer", "encoding/json", true, false},
		{"everyone may use the clock", "tokenizer", module + "/clock", true, false},
		{"the clock stays a leaf", "clock", module + "/tokenizer", false, false},
		{"the installer writes files atomically", "installer", module + "/atomicfile", true, false},
		{"the file writer stays a leaf", "atomicfile", module + "/pki", false, false},
		{"installer reads hearth through its own interfaces", "installer", module + "/nodes", false, false},
		{"nats inside cluster", "cluster", "github.com/nats-io/nats-server/v2/server", true, false},
		{"nats outside cluster", "router", "github.com/nats-io/nats.go", false, false},
		{"mdns outside cluster", "cmd/hearth", "github.com/grandcat/zeroconf", false, false},
		{"cmd uses the admin API's client", "cmd/hearth", module + "/adminapi", true, false},
		{"the console does not reach the admin API", "console", module + "/adminapi", false, false},
		{"the admin API reads the daemon through its own interfaces", "adminapi", module + "/runtime", false, false},
		{"the admin API serves with fiber", "adminapi", "github.com/gofiber/fiber/v2", true, false},
		{"the daemon mounts the console", "daemon", module + "/console", true, false},
		{"nobody but cmd imports the daemon", "api", module + "/daemon", false, false},
		{"cmd imports the daemon", "cmd/hearth", module + "/daemon", true, false},
		{"the daemon is no bench", "daemon", module + "/bench", false, false},
		{"the test summary stands alone", "scripts/testsummary", module + "/router", false, false},
		// What ships, apart from what tests may use.
		{"the gateway ships without an engine", "api", module + "/runtime/sim", false, false},
		{"the gateway's tests drive a simulated engine", "api", module + "/runtime/sim", true, true},
		{"the cluster's tests hash real tokens", "cluster", module + "/tokenizer", true, true},
		{"a test rule is not a production rule", "cluster", module + "/tokenizer", false, false},
		{"tests too stay below the daemon", "api", module + "/daemon", false, true},
		{"production imports no test helper", "daemon", module + "/runtime/docker/dockertest", false, false},
		{"tests import test helpers", "daemon", module + "/runtime/docker/dockertest", true, true},
		{"a test helper builds on what it helps", "runtime/docker/dockertest", module + "/runtime/docker", true, false},
		{"cmd ships no test helper", "cmd/hearth", module + "/nodes/nvmltest", false, false},
		// Within a tree: ancestors only, and the parts the tree's rule names.
		{"the router does not follow engines' events", "router", module + "/router/ingest", false, false},
		{"ingest builds on the router", "router/ingest", module + "/router", true, false},
		{"the router's tests may use its whole tree", "router", module + "/router/ingest", true, true},
		{"runtime knows no runtime: sim", "runtime", module + "/runtime/sim", false, false},
		{"runtime knows no runtime: docker", "runtime", module + "/runtime/docker", false, false},
		{"runtime knows no runtime: process", "runtime", module + "/runtime/process", false, false},
		{"the supervisor's tests run the simulated runtime", "runtime", module + "/runtime/sim", true, true},
		{"one runtime knows no other", "runtime/docker", module + "/runtime/sim", false, false},
		{"the simulator's command line builds on the simulator", "runtime/sim/simcli", module + "/runtime/sim", true, false},
		{"the gateway keeps answers in its store", "api", module + "/api/store", true, false},
		{"the console lays out its components", "console", module + "/console/components", true, false},
		// Subpackages whose rule is tighter than their tree's.
		{"the store knows no HTTP", "api/store", module + "/api", false, false},
		{"the store describes keys", "api/store", module + "/apikey", true, false},
		{"components import nothing", "console/components", module + "/console", false, false},
		{"components may use the clock", "console/components", module + "/clock", true, false},
		{"the doctor reads Hearth through its own interfaces", "installer/doctor", module + "/installer", false, false},
		{"the config file knows no flag", "installer/config", module + "/installer", false, false},
		{"output lengths are no routing", "router/osl", module + "/router", false, false},
		{"one runtime knows no router", "runtime/process", module + "/router", false, false},
		{"the conformance suite holds only tests", "runtime/conformance", module + "/runtime/sim", false, false},
		{"the conformance suite's tests drive the simulator", "runtime/conformance", module + "/runtime/sim", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := checkImport(tc.pkg, tc.imp, tc.test)
			if (msg == "") != tc.wantOK {
				t.Errorf("checkImport(%q, %q, test %v) = %q, want ok=%v", tc.pkg, tc.imp, tc.test, msg, tc.wantOK)
			}
		})
	}
}
