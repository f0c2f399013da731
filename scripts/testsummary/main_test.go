package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestSummaryGolden runs a recorded go test -json stream (a test that
// timed out, a failed test with a failed and a passing subtest, a package
// that did not build, a passing one) through the summary.
func TestSummaryGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "timeout-fail-build.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	failed, err := summarize(bytes.NewReader(in), &out, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("the stream has failures, and the summary says none")
	}
	path := filepath.Join("testdata", "timeout-fail-build.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("summary differs from %s (go test -update rewrites it):\n%s", path, out.String())
	}
	for _, s := range []string{
		"panic: test timed out after 1s", // what ended the package
		"--- UNFINISHED: TestSlow/sub",
		"b_test.go:3:27: declared and not used: x",
		"ok  \texample.com/demo/c",
		"    a_test.go:3: bad",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("summary lacks %q", s)
		}
	}
	for _, s := range []string{"quiet when it passes", "=== RUN"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("summary shows %q, which a plain go test hides", s)
		}
	}
}

func TestSummaryExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		failed       bool
		err          bool
	}{
		{"passing package", `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.6s\n"}
{"Action":"pass","Package":"p","Elapsed":0.6}
`, false, false},
		{"stream cut inside a package", `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
`, true, false},
		{"package failed without a failed test", `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"TestMain said no\n"}
{"Action":"fail","Package":"p","Elapsed":0.1}
`, true, false},
		{"not json", "ok  \tp\t0.6s\n", true, true},
		{"empty", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := summarize(strings.NewReader(tc.stream), &out, 10)
			if failed != tc.failed || (err != nil) != tc.err {
				t.Errorf("failed %v, error %v; want failed %v, an error %v\n%s", failed, err, tc.failed, tc.err, out.String())
			}
		})
	}
}

// FuzzSummary: any stream, however cut or garbled, gives a summary or an
// error, never a panic.
func FuzzSummary(f *testing.F) {
	if in, err := os.ReadFile(filepath.Join("testdata", "timeout-fail-build.json")); err == nil {
		f.Add(in)
	}
	f.Add([]byte(`{"Action":"fail","Package":"p","Test":"TestA/b/c"}`))
	f.Add([]byte(`{"Action":"output","Test":"TestA"}{"Action":"fail"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		_, _ = summarize(bytes.NewReader(in), &out, 5)
	})
}
