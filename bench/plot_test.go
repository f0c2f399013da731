package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestWriteSVGGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, "TTFT, agentic workload (seed 42)", sampleRuns()); err != nil {
		t.Fatal(err)
	}
	golden(t, "ttft.svg.golden", b.Bytes())
}

// wellFormed parses an SVG document with encoding/xml and returns its
// element names and character data.
func wellFormed(t *testing.T, doc []byte) (elements map[string]int, text string) {
	t.Helper()
	elements = map[string]int{}
	var sb strings.Builder
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elements[tok.Name.Local]++
		case xml.CharData:
			sb.Write(tok)
		}
	}
	return elements, sb.String()
}

func TestWriteSVGContent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, "TTFT", sampleRuns()); err != nil {
		t.Fatal(err)
	}
	el, text := wellFormed(t, b.Bytes())
	// Three panels; three policies, a p50 and a p90 line each; 8 runs, two
	// markers each.
	if el["path"] != 3*6 || el["circle"] != 3*16 {
		t.Errorf("%d paths and %d markers, want 18 and 48", el["path"], el["circle"])
	}
	for _, want := range []string{"round_robin", "kv", "hearth", "p50", "p90", "TTFT (ms)", "slowest turn TTFT (ms)",
		"session task time (s)", "concurrent sessions", "16", "32",
		"hearth, 16 sessions: session task time (s) 64.32"} {
		if !strings.Contains(text, want) {
			t.Errorf("the chart has no text %q", want)
		}
	}
	// round_robin was not run at 32 sessions: its lines stop at 16.
	if !strings.Contains(b.String(), `stroke="#0072B2"`) || strings.Contains(text, "round_robin, 32 sessions") {
		t.Error("round_robin has a point at 32 sessions")
	}
}

func TestWriteSVGEscapes(t *testing.T) {
	runs := []RunSummary{{Policy: `a<b&"c"`, Sessions: 1, TTFT: Latency{P50: 5, P90: 9}}}
	var b bytes.Buffer
	if err := WriteSVG(&b, "</svg><script>alert(1)</script>", runs); err != nil {
		t.Fatal(err)
	}
	el, text := wellFormed(t, b.Bytes())
	if el["script"] != 0 {
		t.Error("the title injected an element")
	}
	if !strings.Contains(text, `a<b&"c"`) || !strings.Contains(text, "</svg><script>") {
		t.Error("escaped text does not read back as written")
	}
}

func TestWriteSVGDegenerate(t *testing.T) {
	tests := []struct {
		name string
		runs []RunSummary
	}{
		{"no runs", nil},
		{"all zero", []RunSummary{{Policy: "kv", Sessions: 4}}},
		{"duplicate run", []RunSummary{{Policy: "kv", Sessions: 4, TTFT: Latency{P50: 1}}, {Policy: "kv", Sessions: 4, TTFT: Latency{P50: 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteSVG(&b, "x", tt.runs); err != nil {
				t.Fatal(err)
			}
			wellFormed(t, b.Bytes())
			if strings.Contains(b.String(), "NaN") || strings.Contains(b.String(), "Inf") {
				t.Errorf("non-finite coordinate in\n%s", b.String())
			}
		})
	}
}

func TestNiceScale(t *testing.T) {
	tests := []struct {
		max, step, top float64
	}{
		{6100, 2000, 8000},
		{900, 200, 1000},
		{1000, 200, 1000},
		{0.7, 0.2, 0.8},
		{0, 0.2, 1},
		{-3, 0.2, 1},
	}
	for _, tt := range tests {
		step, top := niceScale(tt.max, 5)
		if step != tt.step || top != tt.top {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tt.max, step, top, tt.step, tt.top)
		}
	}
}

func TestWriteSeriesSVGGolden(t *testing.T) {
	x, series, err := ReadSeriesCSV(strings.NewReader("minute,daemon,engine0\n0,80,78.5\n1,252.4,\n2,305.4,133.6\n3.5,258.6,166.3\n"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	err = WriteSeriesSVG(&b, "soak <test>", "minutes", x, []SeriesPanel{
		{Title: "RSS (MB)", Series: series},
		{Title: "goroutines", Series: []Series{{Name: "daemon", Values: []float64{100, 125, 151, 182}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	elements, text := wellFormed(t, b.Bytes())
	if elements["path"] != 3 || !strings.Contains(text, "soak <test>") {
		t.Errorf("%d paths, text %q; want 3 lines and the escaped title", elements["path"], text)
	}
	// The missing sample of engine0 at minute 1 is a gap: its line moves.
	if !strings.Contains(b.String(), "M") || strings.Count(b.String(), "\" fill=\"none\" stroke=\"#D55E00\"") != 1 {
		t.Errorf("engine0's line is missing")
	}
	golden(t, "soak.svg.golden", b.Bytes())
}

func TestReadSeriesCSV(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		wantErr  bool
		rows     int
	}{
		{"samples", "minute,a,b\n0,1,2\n1,3,\n", false, 2},
		{"header only", "minute,a\n", false, 0},
		{"no series", "minute\n0\n", true, 0},
		{"not a number", "minute,a\n0,x\n", true, 0},
		{"short row", "minute,a,b\n0,1\n", true, 0},
		{"empty", "", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, series, err := ReadSeriesCSV(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrBadSeries) {
					t.Errorf("%v does not wrap ErrBadSeries", err)
				}
				return
			}
			if len(x) != tc.rows {
				t.Errorf("%d rows, want %d", len(x), tc.rows)
			}
			for _, s := range series {
				if len(s.Values) != len(x) {
					t.Errorf("series %s has %d values for %d rows", s.Name, len(s.Values), len(x))
				}
			}
		})
	}
}

func FuzzReadSeriesCSV(f *testing.F) {
	f.Add("minute,a,b\n0,1,2\n1,3,\n")
	f.Add("m,\"q,x\"\n1e3,NaN\n")
	f.Fuzz(func(t *testing.T, in string) {
		x, series, err := ReadSeriesCSV(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, s := range series {
			if len(s.Values) != len(x) {
				t.Fatalf("series %q has %d values for %d rows", s.Name, len(s.Values), len(x))
			}
		}
		var b bytes.Buffer
		if err := WriteSeriesSVG(&b, "t", "x", x, []SeriesPanel{{Title: "y", Series: series}}); err != nil {
			t.Fatal(err)
		}
		wellFormed(t, b.Bytes())
	})
}
