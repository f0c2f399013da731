package kvbm

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// SpaceStats is one space's figures, or the sum over spaces.
type SpaceStats struct {
	Name          string // empty in the total
	Blocks        int64
	Bytes         int64 // headers included, holes counted as written
	Hits          int64 // Gets that returned data
	Misses        int64 // Gets that did not (absent or corrupt)
	Stores        int64 // Puts that wrote a new block
	EvictedBlocks int64 // taken out for capacity
	CorruptBlocks int64 // deleted for failing verification
	ReadBytes     int64 // payload bytes returned by Get
	WrittenBytes  int64 // file bytes written by Put
}

// StoreStats is the store's figures: per space and in total.
type StoreStats struct {
	Spaces           []SpaceStats // sorted by name
	Total            SpaceStats
	CapacityBytes    int64
	FreeDiskBytes    int64 // free to unprivileged users on the store's file system; -1 if unknown
	TempFilesRemoved int64 // stale temp files (torn writes) deleted by scans
}

// Stats returns the store's figures as this process sees them: the
// counters are this Store's, the blocks and bytes its catalog's.
func (s *Store) Stats() StoreStats {
	st := StoreStats{CapacityBytes: s.capacity, FreeDiskBytes: -1}
	if free, err := freeBytes(s.root); err == nil {
		st.FreeDiskBytes = free
	}
	s.mu.Lock()
	st.TempFilesRemoved = s.removed
	for _, sp := range s.spaces {
		ss := SpaceStats{
			Name:          sp.name,
			Blocks:        int64(len(sp.blocks)),
			Bytes:         sp.bytes,
			Hits:          sp.c.hits,
			Misses:        sp.c.misses,
			Stores:        sp.c.stores,
			EvictedBlocks: sp.c.evicted,
			CorruptBlocks: sp.c.corrupt,
			ReadBytes:     sp.c.readBytes,
			WrittenBytes:  sp.c.writtenBytes,
		}
		st.Spaces = append(st.Spaces, ss)
	}
	if f := s.foreign; f.bytes+f.evicted > 0 {
		st.Spaces = append(st.Spaces, SpaceStats{Name: ForeignSpace, Blocks: f.blocks, Bytes: f.bytes,
			EvictedBlocks: f.evicted})
	}
	s.mu.Unlock()
	slices.SortFunc(st.Spaces, func(a, b SpaceStats) int { return strings.Compare(a.Name, b.Name) })
	for _, ss := range st.Spaces {
		t := &st.Total
		t.Blocks += ss.Blocks
		t.Bytes += ss.Bytes
		t.Hits += ss.Hits
		t.Misses += ss.Misses
		t.Stores += ss.Stores
		t.EvictedBlocks += ss.EvictedBlocks
		t.CorruptBlocks += ss.CorruptBlocks
		t.ReadBytes += ss.ReadBytes
		t.WrittenBytes += ss.WrittenBytes
	}
	return st
}

// The store's metrics: per space (label "space") unless noted.
var (
	descBytes    = prometheus.NewDesc("hearth_kvbm_store_bytes", "Bytes of the SSD store's blocks, headers included.", []string{"space"}, nil)
	descBlocks   = prometheus.NewDesc("hearth_kvbm_store_blocks", "Blocks in the SSD store.", []string{"space"}, nil)
	descCapacity = prometheus.NewDesc("hearth_kvbm_store_capacity_bytes", "Bytes the SSD store keeps its blocks under (all spaces).", nil, nil)
	descFree     = prometheus.NewDesc("hearth_kvbm_store_free_disk_bytes", "Free bytes of the file system holding the SSD store.", nil, nil)
	descHits     = prometheus.NewDesc("hearth_kvbm_store_hits_total", "Gets that returned a verified block.", []string{"space"}, nil)
	descMisses   = prometheus.NewDesc("hearth_kvbm_store_misses_total", "Gets that found no block or a corrupt one.", []string{"space"}, nil)
	descEvicted  = prometheus.NewDesc("hearth_kvbm_store_evicted_blocks_total", "Blocks evicted to stay under capacity.", []string{"space"}, nil)
	descCorrupt  = prometheus.NewDesc("hearth_kvbm_store_corrupt_blocks_total", "Blocks deleted for failing verification.", []string{"space"}, nil)
	descRead     = prometheus.NewDesc("hearth_kvbm_store_read_bytes_total", "Payload bytes returned by Get.", []string{"space"}, nil)
	descWritten  = prometheus.NewDesc("hearth_kvbm_store_written_bytes_total", "Block file bytes written by Put.", []string{"space"}, nil)
)

// Describe makes Store a prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBytes, descBlocks, descCapacity, descFree, descHits, descMisses, descEvicted, descCorrupt, descRead, descWritten} {
		ch <- d
	}
}

// Collect makes Store a prometheus.Collector; it reads Stats.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	st := s.Stats()
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(st.CapacityBytes))
	if st.FreeDiskBytes >= 0 {
		ch <- prometheus.MustNewConstMetric(descFree, prometheus.GaugeValue, float64(st.FreeDiskBytes))
	}
	for _, sp := range st.Spaces {
		g := func(d *prometheus.Desc, t prometheus.ValueType, v int64) {
			ch <- prometheus.MustNewConstMetric(d, t, float64(v), sp.Name)
		}
		g(descBytes, prometheus.GaugeValue, sp.Bytes)
		g(descBlocks, prometheus.GaugeValue, sp.Blocks)
		g(descHits, prometheus.CounterValue, sp.Hits)
		g(descMisses, prometheus.CounterValue, sp.Misses)
		g(descEvicted, prometheus.CounterValue, sp.EvictedBlocks)
		g(descCorrupt, prometheus.CounterValue, sp.CorruptBlocks)
		g(descRead, prometheus.CounterValue, sp.ReadBytes)
		g(descWritten, prometheus.CounterValue, sp.WrittenBytes)
	}
}

var _ prometheus.Collector = (*Store)(nil)
