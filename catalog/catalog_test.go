package catalog

import (
	"slices"
	"strings"
	"testing"
)

func TestLookupGPU(t *testing.T) {
	tests := []struct {
		in       string
		wantKind string // "" for not found
	}{
		{"rtx4090", "rtx4090"},
		{"4090", "rtx4090"},
		{"RTX4090", "rtx4090"},
		{" 3090 ", "rtx3090"},
		{"rtx4080", "rtx4080"},
		{"3080", "rtx3080"},
		{"a6000", "a6000"},
		{"RTXA6000", "a6000"},
		{"l40s", "l40s"},
		{"h100", "h100"},
		{"h100-80gb", "h100"},
		{"H200", "h200"},
		{"4070", ""},
		{"", ""},
		{Unknown, ""},
		{"NVIDIA GeForce RTX 4090", ""}, // a marketing name is GPUByName's business
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, ok := LookupGPU(tt.in)
			if ok != (tt.wantKind != "") || g.Kind != tt.wantKind {
				t.Fatalf("LookupGPU(%q) = %q, %v; want %q", tt.in, g.Kind, ok, tt.wantKind)
			}
		})
	}
}

func TestGPUByName(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		in       string
		memory   uint64
		wantKind string
		wantMem  uint64
	}{
		{"consumer board", "NVIDIA GeForce RTX 4090", 24564 * mib, "rtx4090", 24564 * mib},
		{"older driver without prefix", "GeForce RTX 3090", 0, "rtx3090", 24 * gib},
		{"case and spacing", "nvidia  geforce rtx 4080 ", 16 * gib, "rtx4080", 16 * gib},
		{"one name, two sizes", "NVIDIA GeForce RTX 3080", 12 * gib, "rtx3080", 12 * gib},
		{"workstation", "NVIDIA RTX A6000", 48 * gib, "a6000", 48 * gib},
		{"data centre", "NVIDIA L40S", 0, "l40s", 48 * gib},
		{"hopper", "NVIDIA H100 80GB HBM3", 81559 * mib, "h100", 81559 * mib},
		{"as NVML reports an H200", "NVIDIA H200", 150_754_820_096, "h200", 150_754_820_096},
		{"variant with other figures", "NVIDIA H100 PCIe", 80 * gib, Unknown, 80 * gib},
		{"unlisted board", "NVIDIA GeForce RTX 5090", 32 * gib, Unknown, 32 * gib},
		{"empty name", "", 8 * gib, Unknown, 8 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := GPUByName(tt.in, tt.memory)
			if g.Kind != tt.wantKind || g.MemoryBytes != tt.wantMem {
				t.Fatalf("GPUByName(%q, %d) = kind %q, memory %d; want %q, %d", tt.in, tt.memory, g.Kind, g.MemoryBytes, tt.wantKind, tt.wantMem)
			}
			if g.Kind == Unknown {
				if g.Name != tt.in || g.BF16FLOPS != 0 || g.MemoryBandwidth != 0 {
					t.Errorf("unknown board %+v: want its own name and no peaks", g)
				}
				return
			}
			if g.BF16FLOPS == 0 || g.MemoryBandwidth == 0 {
				t.Errorf("known board %+v has no peaks", g)
			}
		})
	}
}

// TestGPUTable keeps the table usable: unique names, figures present and
// plausible, marketing names findable.
func TestGPUTable(t *testing.T) {
	seen := map[string]string{}
	claim := func(name, kind string) {
		if other, ok := seen[name]; ok {
			t.Errorf("name %q is used by %s and %s", name, other, kind)
		}
		seen[name] = kind
	}
	for _, g := range gpus {
		claim(g.Kind, g.Kind)
		for _, a := range g.Aliases {
			claim(a, g.Kind)
			if a != strings.ToLower(a) {
				t.Errorf("%s: alias %q is not lower case, LookupGPU would never match it", g.Kind, a)
			}
		}
		if g.Kind != strings.ToLower(g.Kind) || g.Kind == Unknown {
			t.Errorf("kind %q must be lower case and not %q", g.Kind, Unknown)
		}
		if got := GPUByName(g.Name, 0); got.Kind != g.Kind || got.MemoryBytes != g.MemoryBytes {
			t.Errorf("GPUByName(%q) = %+v, want kind %s", g.Name, got, g.Kind)
		}
		switch {
		case g.MemoryBytes < 8*gib || g.MemoryBandwidth < 100e9 || g.BF16FLOPS < 10e12:
			t.Errorf("%s: implausible figures %+v", g.Kind, g)
		case g.FP8FLOPS != 0 && g.FP8FLOPS < g.BF16FLOPS:
			t.Errorf("%s: FP8 peak %v below BF16 peak %v", g.Kind, g.FP8FLOPS, g.BF16FLOPS)
		case g.PCIeGen < 3 || g.PCIeWidth < 1 || g.PCIeGBps <= 0:
			t.Errorf("%s: no host link %+v", g.Kind, g)
		case g.PCIeGBps > float64(g.PCIeWidth)*linkGBpsPerLane(g.PCIeGen):
			t.Errorf("%s: %v GB/s exceeds the PCIe %d x%d link", g.Kind, g.PCIeGBps, g.PCIeGen, g.PCIeWidth)
		}
	}
	if !slices.Equal(GPUKinds()[:2], []string{"rtx4090", "rtx3090"}) || len(GPUKinds()) != len(gpus) {
		t.Errorf("GPUKinds() = %v", GPUKinds())
	}
}

// linkGBpsPerLane is one lane's raw rate per direction in GB/s.
func linkGBpsPerLane(gen int) float64 {
	return map[int]float64{3: 0.985, 4: 1.969, 5: 3.938}[gen]
}

func TestLookupGPUCopies(t *testing.T) {
	g, _ := LookupGPU("rtx4090")
	g.Aliases[0] = "changed"
	if again, _ := LookupGPU("4090"); again.Kind != "rtx4090" {
		t.Fatalf("changing a result changed the catalog: %+v", again)
	}
}

func TestWeakestGPU(t *testing.T) {
	tests := []struct {
		kinds []string
		want  string
		ok    bool
	}{
		{[]string{"rtx4090"}, "rtx4090", true},
		{[]string{"rtx4090", "rtx4090"}, "rtx4090", true},
		{[]string{"rtx4090", "rtx3090"}, "rtx3090", true},
		{[]string{"3090", "4090"}, "rtx3090", true},
		{[]string{"rtx4090", "a6000"}, "", false}, // the A6000 has more memory, the 4090 more speed
		{[]string{"rtx4090", "nosuch"}, "", false},
	}
	for _, tt := range tests {
		got, ok := WeakestGPU(tt.kinds)
		if got != tt.want || ok != tt.ok {
			t.Errorf("WeakestGPU(%v) = %q, %v; want %q, %v", tt.kinds, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLookupModel(t *testing.T) {
	tests := []struct {
		in, want string // want "" for not found
	}{
		{"qwen3-14b-fp8", "qwen3-14b-fp8"},
		{"Qwen3-14B-FP8", "qwen3-14b-fp8"},
		{"Qwen/Qwen3-14B-FP8", "qwen3-14b-fp8"},
		{"qwen/qwen3-8b", "qwen3-8b"},
		{"qwen3-8b-fp8", "qwen3-8b-fp8"},
		{"qwen3-32b", ""},
		{"Qwen/", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, ok := LookupModel(tt.in)
			if ok != (tt.want != "") || m.Name != tt.want {
				t.Fatalf("LookupModel(%q) = %q, %v; want %q", tt.in, m.Name, ok, tt.want)
			}
		})
	}
}

func TestModelTable(t *testing.T) {
	names := ModelNames()
	if len(names) != len(models) {
		t.Fatalf("ModelNames() = %v", names)
	}
	for _, m := range models {
		switch {
		case m.Name != strings.ToLower(m.Name) || !strings.Contains(m.Repo, "/"):
			t.Errorf("%s: name must be lower case and repo an owner/name id: %+v", m.Name, m)
		case m.Family != FamilyQwen3 && m.Family != FamilyQwen3Coder && m.Family != FamilyLlama3:
			t.Errorf("%s: unknown family %q", m.Name, m.Family)
		case m.Layers < 1 || m.KVHeads < 1 || m.HeadDim < 1 || m.QueryHeads%m.KVHeads != 0:
			t.Errorf("%s: bad shape %+v", m.Name, m)
		case m.Params <= 0 || m.WeightBytes <= 0 || m.MaxModelLen < 1:
			t.Errorf("%s: missing sizes %+v", m.Name, m)
		case m.FP8 && m.WeightBytes > 1.5*m.Params, !m.FP8 && m.WeightBytes < 1.5*m.Params:
			t.Errorf("%s: %v weight bytes for %v parameters do not match FP8=%v", m.Name, m.WeightBytes, m.Params, m.FP8)
		}
	}
}

func TestKVBytesPerToken(t *testing.T) {
	// Qwen3-14B: 40 layers x 8 KV heads x 128 x (K and V) x 2 bytes.
	m, _ := LookupModel("qwen3-14b-fp8")
	if got := m.KVBytesPerToken(); got != 160<<10 {
		t.Errorf("qwen3-14b KV per token = %d, want 160 KiB", got)
	}
	m, _ = LookupModel("qwen3-8b")
	if got := m.KVBytesPerToken(); got != 144<<10 {
		t.Errorf("qwen3-8b KV per token = %d, want 144 KiB", got)
	}
}
