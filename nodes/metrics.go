package nodes

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// gpuGauges describe the hearth_gpu_* series. Every series carries the
// GPU's node, index, UUID and name; a field the GPU cannot report has no
// series rather than a zero.
var gpuGauges = struct {
	memTotal, memUsed, memFree, util, temp, power, powerLimit, lost, processes *prometheus.Desc
}{
	memTotal:   gpuDesc("memory_total_bytes", "Memory of the GPU."),
	memUsed:    gpuDesc("memory_used_bytes", "GPU memory in use, by every process."),
	memFree:    gpuDesc("memory_free_bytes", "GPU memory free."),
	util:       gpuDesc("utilization_percent", "Share of the last sample period a kernel ran on the GPU."),
	temp:       gpuDesc("temperature_celsius", "GPU core temperature."),
	power:      gpuDesc("power_draw_watts", "Power the board draws."),
	powerLimit: gpuDesc("power_limit_watts", "Power limit the driver enforces."),
	lost:       gpuDesc("lost", "1 while the driver reports the GPU lost or no longer lists it."),
	processes:  gpuDesc("processes", "Processes holding memory on the GPU, Hearth's engines included."),
}

func gpuDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("hearth_gpu_"+name, help, []string{"node", "gpu", "uuid", "name"}, nil)
}

// Describe implements prometheus.Collector.
func (s *Sampler) Describe(ch chan<- *prometheus.Desc) {
	g := gpuGauges
	for _, d := range []*prometheus.Desc{g.memTotal, g.memUsed, g.memFree, g.util, g.temp, g.power, g.powerLimit, g.lost, g.processes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector with the latest reading; a
// scrape never calls into the driver.
func (s *Sampler) Collect(ch chan<- prometheus.Metric) {
	inv, _, _ := s.Latest()
	for _, g := range inv.GPUs {
		labels := []string{g.Node, strconv.Itoa(g.Index), g.UUID, g.Name}
		emit := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		lost := 0.0
		if g.Lost {
			lost = 1
		}
		emit(gpuGauges.lost, lost)
		if g.MemoryTotal > 0 {
			emit(gpuGauges.memTotal, float64(g.MemoryTotal))
		}
		if g.Lost {
			continue // the rest would be stale
		}
		if g.MemoryUsageKnown {
			emit(gpuGauges.memUsed, float64(g.MemoryUsed))
			emit(gpuGauges.memFree, float64(g.MemoryFree))
		}
		if g.UtilizationPct >= 0 {
			emit(gpuGauges.util, float64(g.UtilizationPct))
		}
		if g.TemperatureC >= 0 {
			emit(gpuGauges.temp, float64(g.TemperatureC))
		}
		if g.PowerDrawW >= 0 {
			emit(gpuGauges.power, g.PowerDrawW)
		}
		if g.PowerLimitW >= 0 {
			emit(gpuGauges.powerLimit, g.PowerLimitW)
		}
		if g.ProcessesKnown {
			emit(gpuGauges.processes, float64(len(g.Processes)))
		}
	}
}
