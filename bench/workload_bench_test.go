package bench

import (
	"flag"
	"testing"
	"time"
)

// BenchmarkAgenticHour generates and drives one hour of the default agentic
// workload (8 sessions) against a fake service that answers every request
// in 4 s, about what one RTX 4090 needs for a 150-token answer.
func BenchmarkAgenticHour(b *testing.B) {
	b.ReportAllocs()
	a := newAgentic(b, AgenticConfig{Seed: 1, Duration: time.Hour})
	var requests, tokens int
	for b.Loop() {
		requests, tokens = 0, 0
		d := a.NewDriver()
		for _, e := range runFake(b, d, func(*Request) time.Duration { return 4 * time.Second }, nil) {
			if e.sent {
				requests++
				tokens += len(e.req.Prompt)
			}
		}
	}
	b.ReportMetric(float64(requests), "requests/op")
	b.ReportMetric(float64(tokens), "prompt-tokens/op")
}

// BenchmarkAgenticSession makes one default session (8 turns).
func BenchmarkAgenticSession(b *testing.B) {
	b.ReportAllocs()
	a := newAgentic(b, AgenticConfig{Seed: 1})
	i := 0
	for b.Loop() {
		a.Session(i)
		i++
	}
}

// BenchmarkTraceTokens expands the prompts of the 200-line excerpt of the
// conversation trace.
func BenchmarkTraceTokens(b *testing.B) {
	b.ReportAllocs()
	recs, err := ReadTraceFile("testdata/mooncake-conversation-200.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var tokens int
	for _, r := range recs {
		tokens += r.InputLength
	}
	for b.Loop() {
		for i := range recs {
			recs[i].Tokens(0)
		}
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// traceFile names the full public conversation trace for
// BenchmarkTraceHour; at 3 MB it is not kept in testdata. (Not -trace: go
// test takes that flag for its execution trace.)
//
//	go test -run '^$' -bench TraceHour ./bench/ -mooncake-trace /path/to/mooncake-conversation.jsonl
var traceFile = flag.String("mooncake-trace", "", "the full Mooncake conversation trace, for BenchmarkTraceHour")

// BenchmarkTraceHour reads the whole public conversation trace (59 minutes)
// and expands every request's prompt, as a replay does.
func BenchmarkTraceHour(b *testing.B) {
	path := *traceFile
	if path == "" {
		b.Skip("no -mooncake-trace file given; the 200-line excerpt is covered by BenchmarkTraceTokens")
	}
	b.ReportAllocs()
	for b.Loop() {
		recs, err := ReadTraceFile(path)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := NewTrace(recs, TraceConfig{})
		if err != nil {
			b.Fatal(err)
		}
		d := tr.NewDriver()
		for req := d.Next(time.Hour); req != nil; req = d.Next(time.Hour) {
			d.Complete(req, time.Hour, false)
		}
	}
}
