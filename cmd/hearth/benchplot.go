package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hearth-llm/hearth/bench"
)

// runBenchPlot draws a CSV of samples over time, as scripts/soak writes
// it, as an SVG chart: one panel per kind of column, told by the column's
// name (…_rss_mb, …_goroutines, …_fds, other …_mb sizes, …_gb sizes).
func runBenchPlot(_ context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "bench plot", "bench plot --csv FILE --out FILE.svg [flags]")
	in := fs.String("csv", "", "the samples: a header row, then rows whose first column is the x value (required)")
	out := fs.String("out", "", "where to write the chart (required)")
	title := fs.String("title", "Soak test", "the chart's title")
	xTitle := fs.String("x-title", "minutes", "the x axis title")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("%w: bench plot needs --csv and --out", errUsage)
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	defer f.Close()
	x, series, err := bench.ReadSeriesCSV(f)
	if err != nil {
		return fmt.Errorf("bench plot: %s: %w", *in, err)
	}
	var b strings.Builder
	if err := bench.WriteSeriesSVG(&b, *title, *xTitle, x, panelsByUnit(series)); err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	return nil
}

// plotUnits name the panels of bench plot by the suffix of a column's
// name, the first that matches; the suffix is left off the line's name.
var plotUnits = []struct{ suffix, title string }{
	{"_rss_mb", "RSS (MB)"},
	{"_goroutines", "goroutines"},
	{"_fds", "open fds"},
	{"_mb", "on disk (MB)"},
	{"_gb", "size (GB)"},
}

// panelsByUnit groups series into panels by plotUnits, in that order; a
// column of no known unit gets a panel of its own.
func panelsByUnit(series []bench.Series) []bench.SeriesPanel {
	var panels []bench.SeriesPanel
	index := map[string]int{}
	for _, s := range series {
		title, name := s.Name, s.Name
		for _, u := range plotUnits {
			if base, ok := strings.CutSuffix(s.Name, u.suffix); ok {
				title, name = u.title, base
				break
			}
		}
		i, ok := index[title]
		if !ok {
			i = len(panels)
			index[title] = i
			panels = append(panels, bench.SeriesPanel{Title: title})
		}
		panels[i].Series = append(panels[i].Series, bench.Series{Name: name, Values: s.Values})
	}
	return panels
}
