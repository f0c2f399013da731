package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	top := flag.Int("top", 10, "how many of the slowest tests to list")
	flag.Parse()
	failed, err := summarize(os.Stdin, os.Stdout, *top)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json's TestEvent), or of
// the build events go test -json interleaves (ImportPath set).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
	// FailedBuild is set on a package's fail when its test binary did
	// not build (the build events said why).
	FailedBuild string
}

// test is a test's state while its package runs.
type test struct {
	started time.Time
	output  strings.Builder
	// failedSubtests is the output of its subtests that failed, printed
	// after its own when it ends, as go test prints them.
	failedSubtests []string
}

// timing is a finished test or package and how long it took.
type timing struct {
	pkg, test string
	seconds   float64
}

type summary struct {
	out      *bufio.Writer
	tests    map[string]map[string]*test // package -> test -> state
	pkgOut   map[string]*strings.Builder // a package's own output, printed if it fails
	failLine map[string]string           // a package's closing FAIL line, printed after that output
	testFail map[string]bool             // packages with a failed test
	open     map[string]bool             // packages started and not ended
	timings  []timing                    // top-level tests
	packages []timing
	failures []string
}

// summarize copies the stream's essentials to w and reports whether
// anything failed.
func summarize(r io.Reader, w io.Writer, top int) (failed bool, err error) {
	s := &summary{out: bufio.NewWriter(w), tests: map[string]map[string]*test{}, pkgOut: map[string]*strings.Builder{},
		failLine: map[string]string{}, testFail: map[string]bool{}, open: map[string]bool{}}
	dec := json.NewDecoder(r)
	for {
		var e event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			s.out.Flush()
			return true, fmt.Errorf("reading go test -json: %w", err)
		}
		s.handle(e)
	}
	for _, pkg := range slices.Sorted(func(yield func(string) bool) {
		for p := range s.open {
			if !yield(p) {
				return
			}
		}
	}) {
		s.failures = append(s.failures, pkg+": the stream ended before the package did")
	}
	s.writeSummary(top)
	return len(s.failures) > 0, s.out.Flush()
}

func (s *summary) handle(e event) {
	switch {
	case e.Action == "build-output":
		s.out.WriteString(e.Output)
	case e.Action == "build-fail":
		s.failures = append(s.failures, e.ImportPath+": build failed")
	case e.Test == "":
		s.packageEvent(e)
	default:
		s.testEvent(e)
	}
}

func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "start":
		s.open[e.Package] = true
		s.tests[e.Package] = map[string]*test{}
		s.pkgOut[e.Package] = &strings.Builder{}
	case "output":
		// The lines a plain go test prints for every package; the rest
		// (a panic, TestMain's output) only if the package fails.
		// The closing FAIL line comes before the package's fail event,
		// and goes after what that event prints.
		if strings.HasPrefix(e.Output, "ok  ") || strings.HasPrefix(e.Output, "?   ") {
			s.out.WriteString(e.Output)
			s.out.Flush()
		} else if strings.HasPrefix(e.Output, "FAIL\t") {
			s.failLine[e.Package] += e.Output
		} else if b := s.pkgOut[e.Package]; b != nil {
			b.WriteString(e.Output)
		}
	case "pass", "fail", "skip":
		delete(s.open, e.Package)
		s.packages = append(s.packages, timing{pkg: e.Package, seconds: e.Elapsed})
		if e.Action == "fail" {
			s.packageFailed(e)
		}
		delete(s.tests, e.Package)
		delete(s.pkgOut, e.Package)
		delete(s.failLine, e.Package)
	}
}

// packageFailed prints what the package printed itself and the tests
// still running: a timeout's panic, or a crash, ended them.
func (s *summary) packageFailed(e event) {
	if b := s.pkgOut[e.Package]; b != nil && b.Len() > 0 {
		s.out.WriteString(b.String())
	}
	tests := s.tests[e.Package]
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range tests {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		t := tests[name]
		ran := e.Time.Sub(t.started).Round(time.Second)
		fmt.Fprintf(s.out, "--- UNFINISHED: %s (ran %v when %s ended)\n", name, ran, e.Package)
		s.out.WriteString(t.output.String())
		s.failures = append(s.failures, fmt.Sprintf("%s %s: unfinished after %v", e.Package, name, ran))
	}
	if len(names) == 0 && !s.testFail[e.Package] && e.FailedBuild == "" {
		s.failures = append(s.failures, e.Package+": failed")
	}
	s.out.WriteString(s.failLine[e.Package])
	s.out.Flush()
}

func (s *summary) testEvent(e event) {
	tests := s.tests[e.Package]
	if tests == nil { // a stream without the package's start
		tests = map[string]*test{}
		s.tests[e.Package] = tests
		s.pkgOut[e.Package] = &strings.Builder{}
		s.open[e.Package] = true
	}
	t := tests[e.Test]
	if t == nil {
		t = &test{started: e.Time}
		tests[e.Test] = t
	}
	switch e.Action {
	case "output":
		// go test -json runs tests verbosely: the framing lines of a
		// plain run's failures are the "--- FAIL" ones, not these.
		if !strings.HasPrefix(e.Output, "=== ") {
			t.output.WriteString(e.Output)
		}
	case "pass", "skip", "fail":
		delete(tests, e.Test)
		root, _, sub := strings.Cut(e.Test, "/")
		if e.Action == "fail" {
			out := t.output.String() + strings.Join(t.failedSubtests, "")
			if parent := tests[root]; sub && parent != nil {
				parent.failedSubtests = append(parent.failedSubtests, out)
			} else {
				s.out.WriteString(out)
				s.out.Flush()
			}
			s.failures = append(s.failures, e.Package+" "+e.Test)
			s.testFail[e.Package] = true
		}
		if !sub && e.Action != "skip" {
			s.timings = append(s.timings, timing{pkg: e.Package, test: e.Test, seconds: e.Elapsed})
		}
	}
}

func (s *summary) writeSummary(top int) {
	bySeconds := func(a, b timing) int { return cmp.Compare(b.seconds, a.seconds) }
	slices.SortStableFunc(s.packages, bySeconds)
	slices.SortStableFunc(s.timings, bySeconds)
	if n := min(top, len(s.packages)); n > 0 {
		fmt.Fprintf(s.out, "\nslowest packages (of %d):\n", len(s.packages))
		for _, p := range s.packages[:n] {
			fmt.Fprintf(s.out, "%8.1fs  %s\n", p.seconds, p.pkg)
		}
	}
	if n := min(top, len(s.timings)); n > 0 {
		fmt.Fprintf(s.out, "slowest tests (of %d):\n", len(s.timings))
		for _, t := range s.timings[:n] {
			fmt.Fprintf(s.out, "%8.1fs  %s %s\n", t.seconds, t.pkg, t.test)
		}
	}
	if len(s.failures) > 0 {
		fmt.Fprintf(s.out, "FAILED (%d):\n", len(s.failures))
		for _, f := range s.failures {
			fmt.Fprintf(s.out, "  %s\n", f)
		}
	}
}
