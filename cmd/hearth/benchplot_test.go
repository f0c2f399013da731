package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchPlotSoakCSV draws a CSV as scripts/soak writes it: one panel per
// unit, each line named without its unit.
func TestBenchPlotSoakCSV(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "soak.csv"), filepath.Join(dir, "soak.svg")
	csv := "minute,daemon_rss_mb,daemon_goroutines,daemon_fds,engine0_rss_mb,engines_rss_mb,hearth_db_mb,kvstore_mb\n" +
		"0.0,80.3,100,117,79.6,320.2,0.1,3.5\n1.0,252.4,125,223,106.8,418.9,0.1,60.4\n"
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runHearth(t, "", "bench", "plot", "--csv", in, "--out", out, "--title", "Soak"); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">RSS (MB)<", ">goroutines<", ">open fds<", ">on disk (MB)<", ">engines<", ">hearth_db<", ">kvstore<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the chart lacks %s", want)
		}
	}
	if strings.Count(string(svg), "<path ") != 7 {
		t.Errorf("%d lines, want 7", strings.Count(string(svg), "<path "))
	}
	for _, args := range [][]string{{"bench", "plot"}, {"bench", "plot", "--csv", in}} {
		if _, _, err := runHearth(t, "", args...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
