package kvbm

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStoreCollector(t *testing.T) {
	s := openTest(t, t.TempDir(), 3*(HeaderSize+100))
	sp := s.Space("vllm-m-b16")
	for h := range uint64(4) {
		if err := sp.Put(h, 100, payloadFor(h, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sp.Get(3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Get(0, nil); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	flipByte(HeaderSize+5)(t, sp.path(2))
	if _, err := sp.Get(2, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	want := `
# HELP hearth_kvbm_store_blocks Blocks in the SSD store.
# TYPE hearth_kvbm_store_blocks gauge
hearth_kvbm_store_blocks{space="vllm-m-b16"} 2
# HELP hearth_kvbm_store_bytes Bytes of the SSD store's blocks, headers included.
# TYPE hearth_kvbm_store_bytes gauge
hearth_kvbm_store_bytes{space="vllm-m-b16"} 280
# HELP hearth_kvbm_store_capacity_bytes Bytes the SSD store keeps its blocks under (all spaces).
# TYPE hearth_kvbm_store_capacity_bytes gauge
hearth_kvbm_store_capacity_bytes 420
# HELP hearth_kvbm_store_corrupt_blocks_total Blocks deleted for failing verification.
# TYPE hearth_kvbm_store_corrupt_blocks_total counter
hearth_kvbm_store_corrupt_blocks_total{space="vllm-m-b16"} 1
# HELP hearth_kvbm_store_evicted_blocks_total Blocks evicted to stay under capacity.
# TYPE hearth_kvbm_store_evicted_blocks_total counter
hearth_kvbm_store_evicted_blocks_total{space="vllm-m-b16"} 1
# HELP hearth_kvbm_store_hits_total Gets that returned a verified block.
# TYPE hearth_kvbm_store_hits_total counter
hearth_kvbm_store_hits_total{space="vllm-m-b16"} 1
# HELP hearth_kvbm_store_misses_total Gets that found no block or a corrupt one.
# TYPE hearth_kvbm_store_misses_total counter
hearth_kvbm_store_misses_total{space="vllm-m-b16"} 2
# HELP hearth_kvbm_store_read_bytes_total Payload bytes returned by Get.
# TYPE hearth_kvbm_store_read_bytes_total counter
hearth_kvbm_store_read_bytes_total{space="vllm-m-b16"} 100
# HELP hearth_kvbm_store_written_bytes_total Block file bytes written by Put.
# TYPE hearth_kvbm_store_written_bytes_total counter
hearth_kvbm_store_written_bytes_total{space="vllm-m-b16"} 560
`
	names := []string{
		"hearth_kvbm_store_blocks", "hearth_kvbm_store_bytes", "hearth_kvbm_store_capacity_bytes",
		"hearth_kvbm_store_corrupt_blocks_total", "hearth_kvbm_store_evicted_blocks_total",
		"hearth_kvbm_store_hits_total", "hearth_kvbm_store_misses_total",
		"hearth_kvbm_store_read_bytes_total", "hearth_kvbm_store_written_bytes_total",
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(s, "hearth_kvbm_store_free_disk_bytes"); n != 1 {
		t.Errorf("%d free_disk_bytes samples, want 1", n)
	}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
