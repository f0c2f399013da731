package catalog

import (
	"testing"
	"time"
)

// TestSwapTimesOf holds the modelled swaps of Qwen3-14B-FP8 on an RTX 4090
// to the ranges reported for vLLM's sleep mode: a level-1 wake in 0.3-3 s,
// a level-2 wake in 1-5 s, a cold start in 30-60 s; and the order every
// board must keep (a level-1 wake beats a level-2 one, which beats a cold
// start, and the page cache beats the disk).
func TestSwapTimesOf(t *testing.T) {
	st := SwapTimesOf(gpu(t, "rtx4090"), model(t, "qwen3-14b-fp8"), Layout{})
	for _, c := range []struct {
		name     string
		got      time.Duration
		min, max time.Duration
	}{
		{"level-1 wake", st.WakeLevel1, 300 * time.Millisecond, 3 * time.Second},
		{"level-2 wake", st.WakeLevel2, time.Second, 5 * time.Second},
		{"cold start from the page cache", st.ColdFromPageCache, 30 * time.Second, 60 * time.Second},
		{"cold start from disk", st.ColdFromDisk, 30 * time.Second, 60 * time.Second},
		{"level-1 sleep", st.SleepLevel1, 100 * time.Millisecond, 3 * time.Second},
	} {
		if c.got < c.min || c.got > c.max {
			t.Errorf("%s: %v, want %v to %v", c.name, c.got, c.min, c.max)
		}
	}
	if !(st.WakeLevel1 < st.WakeLevel2 && st.WakeLevel2 < st.ColdFromPageCache && st.ColdFromPageCache < st.ColdFromDisk) {
		t.Errorf("order broken: %+v", st)
	}
	if st.HostBytes != model(t, "qwen3-14b-fp8").WeightBytes {
		t.Errorf("host bytes %v, want the weights", st.HostBytes)
	}
	tp2 := SwapTimesOf(gpu(t, "rtx4090"), model(t, "qwen3-14b-fp8"), Layout{TP: 2})
	if tp2.WakeLevel1 >= st.WakeLevel1 {
		t.Errorf("tp 2 wakes in %v, want less than one GPU's %v (each rank copies half)", tp2.WakeLevel1, st.WakeLevel1)
	}
}
