package nodes

import (
	"errors"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
)

func TestParseSimSpec(t *testing.T) {
	cases := []struct {
		name  string
		spec  string
		kinds []string
	}{
		{"two of one kind", "2x4090", []string{"rtx4090", "rtx4090"}},
		{"mix", "1x4090+2x3090", []string{"rtx4090", "rtx3090", "rtx3090"}},
		{"no count means one", "h100", []string{"h100"}},
		{"full names and case", "1xRTX4090 + rtx3090", []string{"rtx4090", "rtx3090"}},
		{"every kind of the catalog", "l40s+a6000+4080+3080+h200", []string{"l40s", "a6000", "rtx4080", "rtx3080", "h200"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := ParseSimSpec(tc.spec)
			if err != nil {
				t.Fatalf("ParseSimSpec(%q): %v", tc.spec, err)
			}
			if len(gpus) != len(tc.kinds) {
				t.Fatalf("got %d GPUs, want %d", len(gpus), len(tc.kinds))
			}
			seen := map[string]bool{}
			for i, g := range gpus {
				if g.Kind != tc.kinds[i] || g.Index != i || !g.Simulated || g.MemoryTotal == 0 {
					t.Errorf("gpu %d = %+v, want kind %s, index %d, simulated, with memory", i, g, tc.kinds[i], i)
				}
				if seen[g.UUID] {
					t.Errorf("duplicate UUID %s", g.UUID)
				}
				seen[g.UUID] = true
			}
		})
	}
}

func TestParseSimSpecRejects(t *testing.T) {
	for _, spec := range []string{"", "2x", "0x4090", "65x4090", "2x4070", "x4090", "2x4090+", "-1x4090"} {
		if gpus, err := ParseSimSpec(spec); !errors.Is(err, ErrBadSimSpec) {
			t.Errorf("ParseSimSpec(%q) = %v, %v; want ErrBadSimSpec", spec, gpus, err)
		}
	}
}

func FuzzParseSimSpec(f *testing.F) {
	for _, s := range []string{"2x4090", "1x4090+2x3090", "h100", "x", "++"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		gpus, err := ParseSimSpec(spec)
		if err == nil && (len(gpus) == 0 || len(gpus) > 64*len(spec)) {
			t.Fatalf("ParseSimSpec(%q) accepted with %d GPUs", spec, len(gpus))
		}
	})
}

func TestHostCUDAVersion(t *testing.T) {
	for v, want := range map[int]string{12090: "12.9", 13000: "13.0", 11080: "11.8", 0: ""} {
		if got := (Host{CUDADriverVersion: v}).CUDAVersion(); got != want {
			t.Errorf("Host{CUDADriverVersion: %d}.CUDAVersion() = %q, want %q", v, got, want)
		}
	}
}

func TestPlannerUse(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name             string
		gpu              GPU
		wantKind         string
		wantMem, wantUse uint64
	}{
		{"simulated", GPU{Kind: "rtx3090", Name: "NVIDIA GeForce RTX 3090", MemoryTotal: 24 << 30, Simulated: true},
			"rtx3090", 24 << 30, 0},
		{"discovered, as the driver reports it", GPU{Kind: "rtx4090", Name: "NVIDIA GeForce RTX 4090", MemoryTotal: 24564 * mib, MemoryUsed: 900 * mib},
			"rtx4090", 24564 * mib, 900 * mib},
		{"a board the catalog does not list", GPU{Kind: catalog.Unknown, Name: "NVIDIA RTX PRO 6000", MemoryTotal: 96 << 30},
			catalog.Unknown, 96 << 30, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.gpu.PlannerUse()
			if u.GPU.Kind != tt.wantKind || u.GPU.MemoryBytes != tt.wantMem || u.UsedBytes != tt.wantUse {
				t.Errorf("PlannerUse = %s, %d bytes, %d used; want %s, %d, %d", u.GPU.Kind, u.GPU.MemoryBytes, u.UsedBytes,
					tt.wantKind, tt.wantMem, tt.wantUse)
			}
		})
	}
}
