package nodes

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParseSMIGPUs parses a recorded two-GPU nvidia-smi answer, what
// a build without cgo does every 2 s (besides running nvidia-smi).
func BenchmarkParseSMIGPUs(b *testing.B) {
	out, err := os.ReadFile(filepath.Join("testdata", "smi", "gpus-4090-3090.txt"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseSMIGPUs(out, "rig"); err != nil {
			b.Fatal(err)
		}
	}
}
