package kvbm

import (
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
)

func TestTierOf(t *testing.T) {
	tests := []struct {
		medium kvevents.Medium
		want   Tier
		ok     bool
	}{
		{kvevents.MediumGPU, TierGPU, true},
		{kvevents.MediumCPU, TierRAM, true},
		{kvevents.MediumDisk, TierDisk, true},
		{kvevents.MediumExternal, TierGPU, false},
		{kvevents.MediumUnknown, TierGPU, false},
	}
	for _, tc := range tests {
		if got, ok := TierOf(tc.medium); got != tc.want || ok != tc.ok {
			t.Errorf("TierOf(%v) = %v, %v; want %v, %v", tc.medium, got, ok, tc.want, tc.ok)
		}
	}
}
