package bench

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Geometry of the chart, in SVG user units (pixels). The chart stacks one
// panel per metric (plotPanels), each with its own y axis.
const (
	plotWidth       = 760
	plotPanelHeight = 300 // one panel, with room for its x labels
	plotLeft        = 80  // room for the y tick labels and axis title
	plotRight       = 180 // room for the legend
	plotTop         = 50  // room for the title
	plotPanelGap    = 60  // below each panel: x tick labels and axis title
	plotYTicks      = 5   // about how many y ticks
	plotFont        = "font-family=\"sans-serif\" font-size=\"12\""
	plotMarkerR     = 3.5
)

// plotColors are distinguishable line colours (Okabe and Ito's palette),
// given to policies in order of first appearance.
var plotColors = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"}

// plotPanel is one metric of the chart: a latency of each run, in the
// panel's unit.
type plotPanel struct {
	title string // the y axis title
	of    func(RunSummary) Latency
	scale float64 // milliseconds per unit of the axis
}

// plotPanels are what a user waits for: each request's first token, the
// slowest one of a session, and the whole task.
var plotPanels = []plotPanel{
	{"TTFT (ms)", func(r RunSummary) Latency { return r.TTFT }, 1},
	{"slowest turn TTFT (ms)", func(r RunSummary) Latency { return r.SlowestTurnTTFT }, 1},
	{"session task time (s)", func(r RunSummary) Latency { return r.Session }, 1000},
}

// WriteSVG writes a chart of p50 (solid) and p90 (dashed) per policy across
// concurrency levels as a standalone SVG document, in three panels: TTFT,
// the slowest turn's TTFT of a session and the session's task time (see
// RunSummary). The levels are spaced evenly along the x axes, in ascending
// order; each y axis starts at zero. A policy not run at some level has a
// gap there. All text is XML-escaped.
func WriteSVG(w io.Writer, title string, runs []RunSummary) error {
	var levels []int
	var policies []string
	byKey := make(map[string]map[int]RunSummary)
	for _, r := range runs {
		if !slices.Contains(levels, r.Sessions) {
			levels = append(levels, r.Sessions)
		}
		if byKey[r.Policy] == nil {
			policies = append(policies, r.Policy)
			byKey[r.Policy] = make(map[int]RunSummary)
		}
		if _, dup := byKey[r.Policy][r.Sessions]; !dup {
			byKey[r.Policy][r.Sessions] = r
		}
	}
	slices.Sort(levels)
	height := plotTop + len(plotPanels)*(plotPanelHeight+plotPanelGap) - plotPanelGap + 60

	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	p("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" %s>\n",
		plotWidth, height, plotWidth, height, plotFont)
	p("<title>%s</title>\n", esc(title))
	p("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	p("<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">%s</text>\n", plotLeft, esc(title))

	innerW := float64(plotWidth - plotLeft - plotRight)
	innerH := float64(plotPanelHeight - 60)
	// Each level gets an equal slot, its point in the middle, so that no
	// marker sits on the y axis.
	xOf := func(i int) float64 { return plotLeft + innerW*(float64(i)+0.5)/float64(len(levels)) }
	for pi, panel := range plotPanels {
		top := float64(plotTop + pi*(plotPanelHeight+plotPanelGap))
		bottom := top + innerH
		val := func(r RunSummary, p90 bool) float64 {
			l := panel.of(r)
			if p90 {
				return finite(l.P90) / panel.scale
			}
			return finite(l.P50) / panel.scale
		}
		maxY := 0.0
		for _, pol := range policies {
			for _, r := range byKey[pol] {
				maxY = max(maxY, val(r, false), val(r, true))
			}
		}
		yOf := writeYAxis(p, top, innerH, maxY, panel.title)

		// X axis.
		for i, lv := range levels {
			x := xOf(i)
			p("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"black\"/>\n", num(x), num(bottom), num(x), num(bottom+5))
			p("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%d</text>\n", num(x), num(bottom+20), lv)
		}
		p("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">concurrent sessions</text>\n", num(plotLeft+innerW/2), num(bottom+40))

		// One solid p50 and one dashed p90 line per policy.
		for ci, pol := range policies {
			color := plotColors[ci%len(plotColors)]
			for _, series := range []struct {
				dash string
				p90  bool
			}{{"", false}, {" stroke-dasharray=\"6 4\"", true}} {
				var path strings.Builder
				move := true
				for i, lv := range levels {
					r, ok := byKey[pol][lv]
					if !ok {
						move = true
						continue
					}
					cmd := "L"
					if move {
						cmd = "M"
					}
					fmt.Fprintf(&path, "%s%s %s ", cmd, num(xOf(i)), num(yOf(val(r, series.p90))))
					move = false
				}
				p("<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", strings.TrimSpace(path.String()), color, series.dash)
				for i, lv := range levels {
					if r, ok := byKey[pol][lv]; ok {
						p("<circle cx=\"%s\" cy=\"%s\" r=\"%s\" fill=\"%s\"><title>%s, %d sessions: %s %s</title></circle>\n",
							num(xOf(i)), num(yOf(val(r, series.p90))), num(plotMarkerR), color, esc(pol), lv,
							esc(panel.title), num(val(r, series.p90)))
					}
				}
			}
		}
	}

	// Legend: policies by colour, then the two line styles.
	lx, ly := plotWidth-plotRight+20, plotTop+10
	for pi, pol := range policies {
		y := ly + 20*pi
		p("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", lx, y, lx+24, y, plotColors[pi%len(plotColors)])
		p("<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%s</text>\n", lx+30, y, esc(pol))
	}
	y := ly + 20*len(policies) + 10
	p("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555555\" stroke-width=\"2\"/>\n", lx, y, lx+24, y)
	p("<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">p50</text>\n", lx+30, y)
	y += 20
	p("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555555\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n", lx, y, lx+24, y)
	p("<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">p90</text>\n", lx+30, y)
	p("</svg>\n")
	if err := b.Flush(); err != nil {
		return fmt.Errorf("bench: write svg: %w", err)
	}
	return nil
}

// niceScale picks a tick step of 1, 2 or 5 times a power of ten giving
// about n ticks up to maxV, and the axis top, a multiple of the step at or
// above maxV. An empty or zero range gets the axis 0 to 1.
func niceScale(maxV float64, n int) (step, top float64) {
	if !(maxV > 0) || math.IsInf(maxV, 0) {
		return 0.2, 1
	}
	raw := maxV / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step, math.Ceil(maxV/step-1e-9) * step
}

// finite maps NaN and infinities to 0, so that a bad value cannot break
// the document.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// num formats a coordinate or value compactly and deterministically.
// writeYAxis draws a panel's grid, axes and y title for values from zero to
// about maxY, and returns the panel's y coordinate of a value.
func writeYAxis(p func(string, ...any), top, innerH, maxY float64, title string) (yOf func(float64) float64) {
	bottom := top + innerH
	step, axisTop := niceScale(maxY, plotYTicks)
	yOf = func(v float64) float64 { return top + innerH*(1-finite(v)/axisTop) }
	for v := 0.0; v <= axisTop+step/2; v += step {
		y := yOf(v)
		p("<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#dddddd\"/>\n", plotLeft, num(y), plotWidth-plotRight, num(y))
		p("<text x=\"%d\" y=\"%s\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n", plotLeft-8, num(y), num(v))
	}
	p("<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"black\"/>\n", plotLeft, num(top), plotLeft, num(bottom))
	p("<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"black\"/>\n", plotLeft, num(bottom), plotWidth-plotRight, num(bottom))
	p("<text transform=\"translate(20 %s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", num(top+innerH/2), esc(title))
	return yOf
}

func num(v float64) string {
	return strconv.FormatFloat(math.Round(finite(v)*100)/100, 'f', -1, 64)
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}
