//go:build linux && cgo

package nodes

import (
	"context"
	"testing"

	"github.com/hearth-llm/hearth/nodes/nvmltest"
)

// BenchmarkNVMLDiscover is one reading of two boards through NVML (mocked:
// the driver's own time is not in it), what the sampler does every 2 s.
func BenchmarkNVMLDiscover(b *testing.B) {
	src := NewNVMLSource(nvmltest.Machine(nvmltest.Fixed(nvmltest.RTX4090()), nvmltest.Fixed(nvmltest.RTX3090())), "rig", b.TempDir())
	defer src.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Discover(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSample is one sampler reading of two boards, lost/found
// bookkeeping and the copy kept for readers included.
func BenchmarkSample(b *testing.B) {
	src := NewNVMLSource(nvmltest.Machine(nvmltest.Fixed(nvmltest.RTX4090()), nvmltest.Fixed(nvmltest.RTX3090())), "rig", b.TempDir())
	defer src.Close()
	s := NewSampler(SamplerConfig{Source: src})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
