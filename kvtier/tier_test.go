package kvtier

import (
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
)

func TestOf(t *testing.T) {
	tests := []struct {
		medium kvevents.Medium
		want   Tier
		ok     bool
	}{
		{kvevents.MediumGPU, GPU, true},
		{kvevents.MediumCPU, RAM, true},
		{kvevents.MediumDisk, Disk, true},
		{kvevents.MediumExternal, GPU, false},
		{kvevents.MediumUnknown, GPU, false},
	}
	for _, tc := range tests {
		if got, ok := Of(tc.medium); got != tc.want || ok != tc.ok {
			t.Errorf("Of(%v) = %v, %v; want %v, %v", tc.medium, got, ok, tc.want, tc.ok)
		}
	}
}

func TestString(t *testing.T) {
	for tier, want := range map[Tier]string{GPU: "GPU", RAM: "RAM", Disk: "Disk", Count: "Tier(3)"} {
		if got := tier.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", tier, got, want)
		}
	}
}
