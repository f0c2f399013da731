package bench

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Series is one line of a time-series chart: a name for the legend and a
// value for each x of the chart (NaN: no sample there).
type Series struct {
	Name   string
	Values []float64
}

// SeriesPanel is one panel of a time-series chart: its y axis title and
// its lines.
type SeriesPanel struct {
	Title  string
	Series []Series
}

// WriteSeriesSVG writes panels of lines over shared x values (minutes of a
// soak test, say) as a standalone SVG document, in the geometry, colours
// and scales of WriteSVG: one panel per SeriesPanel, stacked, each with its
// own y axis from zero and its own legend. A NaN value leaves a gap in its
// line. All text is XML-escaped.
func WriteSeriesSVG(w io.Writer, title, xTitle string, x []float64, panels []SeriesPanel) error {
	height := plotTop + len(panels)*(plotPanelHeight+plotPanelGap) - plotPanelGap + 60
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	p("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" %s>\n",
		plotWidth, height, plotWidth, height, plotFont)
	p("<title>%s</title>\n", esc(title))
	p("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	p("<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">%s</text>\n", plotLeft, esc(title))

	maxX := 0.0
	for _, v := range x {
		maxX = max(maxX, finite(v))
	}
	xStep, xTop := niceScale(maxX, 8)
	innerW := float64(plotWidth - plotLeft - plotRight)
	innerH := float64(plotPanelHeight - 60)
	xOf := func(v float64) float64 { return plotLeft + innerW*finite(v)/xTop }
	for pi, panel := range panels {
		top := float64(plotTop + pi*(plotPanelHeight+plotPanelGap))
		bottom := top + innerH
		maxY := 0.0
		for _, s := range panel.Series {
			for _, v := range s.Values {
				maxY = max(maxY, finite(v))
			}
		}
		yOf := writeYAxis(p, top, innerH, maxY, panel.Title)
		for v := 0.0; v <= xTop+xStep/2; v += xStep {
			xv := xOf(v)
			p("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"black\"/>\n", num(xv), num(bottom), num(xv), num(bottom+5))
			p("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n", num(xv), num(bottom+20), num(v))
		}
		p("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n", num(plotLeft+innerW/2), num(bottom+40), esc(xTitle))

		for ci, s := range panel.Series {
			color := plotColors[ci%len(plotColors)]
			var path strings.Builder
			move := true
			for i, v := range s.Values {
				if i >= len(x) || math.IsNaN(v) { // no sample: a gap
					move = true
					continue
				}
				cmd := "L"
				if move {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%s %s ", cmd, num(xOf(x[i])), num(yOf(v)))
				move = false
			}
			p("<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"><title>%s</title></path>\n",
				strings.TrimSpace(path.String()), color, esc(s.Name))
			y := int(top) + 10 + 20*ci
			lx := plotWidth - plotRight + 20
			p("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", lx, y, lx+24, y, color)
			p("<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%s</text>\n", lx+30, y, esc(s.Name))
		}
	}
	p("</svg>\n")
	if err := b.Flush(); err != nil {
		return fmt.Errorf("bench: write svg: %w", err)
	}
	return nil
}

// ErrBadSeries is wrapped by every error about a series CSV.
var ErrBadSeries = errors.New("bad series CSV")

// ReadSeriesCSV reads a CSV of samples: a header row naming the columns,
// then one row per sample, its first column the x value (minutes, say).
// An empty cell is NaN (no sample); any other cell must be a number. It
// returns the x values and one Series per further column.
func ReadSeriesCSV(r io.Reader) (x []float64, series []Series, err error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w: header: %w", ErrBadSeries, err)
	}
	if len(header) < 2 {
		return nil, nil, fmt.Errorf("bench: %w: %d columns, want x and at least one series", ErrBadSeries, len(header))
	}
	series = make([]Series, len(header)-1)
	for i, name := range header[1:] {
		series[i].Name = strings.TrimSpace(name)
	}
	for line := 2; ; line++ {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return x, series, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("bench: %w: %w", ErrBadSeries, err)
		}
		vals := make([]float64, len(row))
		for i, cell := range row {
			cell = strings.TrimSpace(cell)
			if cell == "" {
				vals[i] = math.NaN()
				continue
			}
			if vals[i], err = strconv.ParseFloat(cell, 64); err != nil {
				return nil, nil, fmt.Errorf("bench: %w: line %d, column %q: %q is not a number", ErrBadSeries, line, header[i], cell)
			}
		}
		x = append(x, vals[0])
		for i := range series {
			series[i].Values = append(series[i].Values, vals[i+1])
		}
	}
}
