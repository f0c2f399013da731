package bench

import (
	"context"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

// BenchmarkSimAgentic simulates ten minutes of the default agentic
// workload at 20 sessions on two RTX 4090s under the hearth policy and
// reports how many times faster than real time that ran.
func BenchmarkSimAgentic(b *testing.B) {
	s, err := NewSim(SimConfig{GPUs: []string{"rtx4090", "rtx4090"}})
	if err != nil {
		b.Fatal(err)
	}
	w, err := NewAgentic(AgenticConfig{Sessions: 20})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var simulated time.Duration
	start := time.Now()
	for b.Loop() {
		run, err := s.Run(context.Background(), w, router.PolicyHearth, 20, nil)
		if err != nil {
			b.Fatal(err)
		}
		simulated += run.Elapsed
	}
	b.ReportMetric(simulated.Seconds()/time.Since(start).Seconds(), "x-realtime")
}
