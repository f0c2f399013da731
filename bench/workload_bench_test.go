package bench

import (
	"os"
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

// BenchmarkTraceHour reads the whole public conversation trace (59 minutes)
// and expands every request's prompt, as a replay does.
func BenchmarkTraceHour(b *testing.B) {
	const path = "/work/shared/traces/mooncake-conversation.jsonl"
	if _, err := os.Stat(path); err != nil {
		b.Skipf("the full trace is not here (%v); the 200-line excerpt is covered by BenchmarkTraceTokens", err)
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
