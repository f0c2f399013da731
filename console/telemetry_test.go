package console

import (
	"errors"
	"html"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const gib = 1 << 30

func TestSparkline(t *testing.T) {
	nan := math.NaN()
	// The box is 0..117 wide and 3..21 high; a value at lo sits on y=21, at
	// hi on y=3.
	tests := []struct {
		name   string
		values []float64
		lo, hi float64
		want   []string
	}{
		{"nothing", nil, 0, 100, nil},
		{"all unknown", []float64{nan, nan, nan}, 0, 100, nil},
		{"rising", []float64{0, 50, 100}, 0, 100, []string{"0,21 58.5,12 117,3"}},
		{"offset scale", []float64{20, 60, 100}, 20, 100, []string{"0,21 58.5,12 117,3"}},
		{"clamped", []float64{-10, 200}, 0, 100, []string{"0,21 117,3"}},
		{"gap splits the line", []float64{100, 100, nan, 0, 0}, 0, 100, []string{"0,3 29.3,3", "87.8,21 117,21"}},
		{"lone point is a dash", []float64{nan, 50, nan}, 0, 100, []string{"58.5,12 61.5,12"}},
		{"empty scale draws at the bottom", []float64{0, 0}, 0, 0, []string{"0,21 117,21"}},
		{"single slot", []float64{100}, 0, 100, []string{"0,3 3,3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := sparkline(tc.values, tc.lo, tc.hi)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMemoryBarVM(t *testing.T) {
	tests := []struct {
		name                               string
		e                                  Engine
		known                              bool
		hearth, other, driver, free, total string
		hearthW, otherX, otherW, driverW   string
		others                             []string
	}{
		{name: "unknown owners", e: Engine{MemoryUsed: 20 * gib, MemoryTotal: 24 * gib}},
		{name: "unknown total", e: Engine{MemoryByOwnerKnown: true, MemoryHearth: 20 * gib}},
		{name: "hearth alone", e: Engine{MemoryByOwnerKnown: true, MemoryUsed: 18 * gib, MemoryTotal: 24 * gib, MemoryHearth: 18 * gib},
			known: true, hearth: "18.0", other: "0.0", free: "6.0", total: "24.0",
			hearthW: "225", otherX: "225", otherW: "0", driverW: "0", others: []string{}},
		{name: "another program holds 6 GiB", e: Engine{MemoryByOwnerKnown: true, MemoryUsed: 22 * gib, MemoryTotal: 24 * gib,
			MemoryHearth: 15 * gib, MemoryOther: 6 * gib,
			OtherProcesses: []GPUProcess{{Name: "python3", PID: 4242, UsedBytes: 5 * gib}, {PID: 77, UsedBytes: gib}, {Name: "Xorg", PID: 1}}},
			known: true, hearth: "15.0", other: "6.0", driver: "1.0", free: "2.0", total: "24.0",
			hearthW: "187.5", otherX: "187.5", otherW: "75", driverW: "12.5",
			others: []string{"python3 (pid 4242) 5.0 GiB", "unnamed (pid 77) 1.0 GiB", "Xorg (pid 1)"}},
		{name: "used unknown: free is what owners leave", e: Engine{MemoryByOwnerKnown: true, MemoryTotal: 24 * gib, MemoryHearth: 12 * gib, MemoryOther: 4 * gib},
			known: true, hearth: "12.0", other: "4.0", free: "8.0", total: "24.0",
			hearthW: "150", otherX: "150", otherW: "50", driverW: "0", others: []string{}},
		{name: "owners over the total are clamped", e: Engine{MemoryByOwnerKnown: true, MemoryUsed: 30 * gib, MemoryTotal: 24 * gib, MemoryHearth: 20 * gib, MemoryOther: 10 * gib},
			known: true, hearth: "20.0", other: "4.0", free: "0.0", total: "24.0",
			hearthW: "250", otherX: "250", otherW: "50", driverW: "0", others: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := memoryBarVM(tc.e)
			if b.Known != tc.known {
				t.Fatalf("known %v, want %v", b.Known, tc.known)
			}
			if !tc.known {
				return
			}
			if b.Hearth != tc.hearth || b.Other != tc.other || b.Driver != tc.driver || b.Free != tc.free || b.Total != tc.total {
				t.Errorf("GiB hearth %s other %s driver %q free %s total %s", b.Hearth, b.Other, b.Driver, b.Free, b.Total)
			}
			if b.HearthW != tc.hearthW || b.OtherX != tc.otherX || b.OtherW != tc.otherW || b.DriverW != tc.driverW {
				t.Errorf("geometry hearth %s, other %s+%s, driver %s", b.HearthW, b.OtherX, b.OtherW, b.DriverW)
			}
			if !slices.Equal(b.Others, tc.others) {
				t.Errorf("others %q, want %q", b.Others, tc.others)
			}
			if !strings.Contains(b.Label, "free "+tc.free+" GiB, of "+tc.total+" GiB") {
				t.Errorf("label %q", b.Label)
			}
		})
	}
}

func TestGPURingSeries(t *testing.T) {
	const interval = 2 * time.Second
	r := &gpuRing{samples: make([]gpuSample, 4)}
	at := func(back int, util float64) gpuSample {
		return gpuSample{at: t0.Add(-time.Duration(back) * interval), utilPct: util, tempC: math.NaN(), powerW: 300, memUsed: math.NaN()}
	}
	str := func(v []float64) string {
		var b strings.Builder
		for _, x := range v {
			if math.IsNaN(x) {
				b.WriteString("_ ")
				continue
			}
			b.WriteString(strconv.FormatFloat(x, 'g', -1, 64) + " ")
		}
		return strings.TrimSpace(b.String())
	}
	if got := str(r.series(t0, interval).utilPct); got != "_ _ _ _" {
		t.Errorf("empty ring: %s", got)
	}
	r.add(at(6, 1)) // pushed out of the ring by the later samples
	r.add(at(3, 10))
	r.add(at(2, 20))
	// A missed tick at 1 stays a gap; a sample a little late lands in the
	// nearest slot.
	s := at(0, 40)
	s.at = s.at.Add(-400 * time.Millisecond)
	r.add(s)
	r.add(at(-1, 99)) // from the future (a clock that went back): left out
	g := r.series(t0, interval)
	if got := str(g.utilPct); got != "10 20 _ 40" {
		t.Errorf("utilisation %s, want 10 20 _ 40", got)
	}
	if got := str(g.tempC); got != "_ _ _ _" {
		t.Errorf("unknown temperature %s, want gaps", got)
	}
	if got := str(g.powerW); got != "300 300 _ 300" {
		t.Errorf("power %s", got)
	}
	// Ten seconds later the old samples slide left and out.
	if got := str(r.series(t0.Add(5*interval), interval).utilPct); got != "_ _ _ _" {
		t.Errorf("after the window: %s", got)
	}
	// The sample from the future shows once its time has come.
	if got := str(r.series(t0.Add(interval), interval).utilPct); got != "20 _ 40 99" {
		t.Errorf("one tick later: %s", got)
	}
}

func TestGPUSampleOf(t *testing.T) {
	e := Engine{UtilizationPct: 80, TemperatureC: 65, PowerDrawW: 0, MemoryUsed: 3 * gib}
	s := gpuSampleOf(t0, &e)
	if s.utilPct != 80 || s.tempC != 65 || s.powerW != 0 || s.memUsed != 3*gib {
		t.Errorf("known sample %+v", s)
	}
	e = Engine{UtilizationPct: -1, TemperatureC: -1, PowerDrawW: -1}
	s = gpuSampleOf(t0, &e)
	if !math.IsNaN(s.utilPct) || !math.IsNaN(s.tempC) || !math.IsNaN(s.powerW) || !math.IsNaN(s.memUsed) {
		t.Errorf("unknown sample %+v", s)
	}
	e = Engine{UtilizationPct: 80, TemperatureC: 65, PowerDrawW: 300, MemoryUsed: gib, GPULost: true}
	s = gpuSampleOf(t0, &e)
	if !math.IsNaN(s.utilPct) || !math.IsNaN(s.tempC) || !math.IsNaN(s.powerW) || !math.IsNaN(s.memUsed) {
		t.Errorf("a lost GPU's repeated figures were recorded: %+v", s)
	}
}

func TestGPUCardUnknownTelemetry(t *testing.T) {
	cfg := testConfig()
	// A simulated GPU: no sensors, no process list, no memory figures.
	sim := Engine{Worker: "sim0", UtilizationPct: -1, TemperatureC: -1, PowerDrawW: -1, PowerLimitW: -1}
	c := gpuCardVM(cfg, sim, workerView{})
	if c.TelemetryKnown || c.MemoryBar.Known || c.Lost || c.PlanNote != "" {
		t.Errorf("simulated GPU card: telemetry %v, memory bar %v, lost %v, note %q", c.TelemetryKnown, c.MemoryBar.Known, c.Lost, c.PlanNote)
	}
	for _, s := range c.Sparks {
		if s.Now != noValue || len(s.Lines) != 0 {
			t.Errorf("%s: now %q, %d lines", s.Name, s.Now, len(s.Lines))
		}
	}
	if c.SparkWindow != "2 min" {
		t.Errorf("window %q, want 2 min", c.SparkWindow)
	}

	// A simulated GPU whose engine reserved its share: the card says it is
	// a reservation, not a reading, and what of it holds data; the VRAM
	// sparkline stays empty, since nothing was read.
	reserved := sim
	reserved.MemoryUsed, reserved.MemoryTotal, reserved.MemoryReserved, reserved.MemoryInUse = 24*gib*9/10, 24*gib, true, 14*gib+gib/2
	c = gpuCardVM(cfg, reserved, workerView{})
	if c.Memory != "reserved by the engine: 21.6 of 24.0 GiB" || c.MemoryInUse != "14.5 GiB: weights and KV in use" {
		t.Errorf("reserved memory %q, in use %q", c.Memory, c.MemoryInUse)
	}
	if c.TelemetryKnown || c.Sparks[3].Now != noValue {
		t.Errorf("a reservation shown as a reading: telemetry %v, VRAM now %q", c.TelemetryKnown, c.Sparks[3].Now)
	}
	if s := gpuSampleOf(t0, &reserved); !math.IsNaN(s.memUsed) {
		t.Errorf("a reservation sampled as memory use: %v", s.memUsed)
	}
	reserved.MemoryInUse = 0
	if c := gpuCardVM(cfg, reserved, workerView{}); c.MemoryInUse != "" {
		t.Errorf("unknown use shown as %q", c.MemoryInUse)
	}

	// A real GPU's latest figures, before any history.
	real := Engine{Worker: "w0", UtilizationPct: 87, TemperatureC: 64, PowerDrawW: 311.6, PowerLimitW: 450, MemoryUsed: 18 * gib, MemoryTotal: 24 * gib}
	c = gpuCardVM(cfg, real, workerView{})
	now := map[string]string{}
	for _, s := range c.Sparks {
		now[s.Name] = s.Now
	}
	want := map[string]string{"Util": "87%", "Temp": "64 °C", "Power": "312 / 450 W", "VRAM": "18.0 GiB"}
	if !c.TelemetryKnown || len(now) != len(want) {
		t.Fatalf("telemetry known %v, sparks %v", c.TelemetryKnown, now)
	}
	for k, v := range want {
		if now[k] != v {
			t.Errorf("%s now %q, want %q", k, now[k], v)
		}
	}
	real.PowerLimitW = -1
	if s := gpuCardVM(cfg, real, workerView{}).Sparks[2]; s.Now != "312 W" {
		t.Errorf("power without a limit: %q", s.Now)
	}

	lost := real
	lost.GPULost, lost.GPUErr = true, "nvml: GPU is lost (ERROR_GPU_IS_LOST)"
	c = gpuCardVM(cfg, lost, workerView{})
	if !c.Lost || c.LostText != "GPU lost: nvml: GPU is lost (ERROR_GPU_IS_LOST)" {
		t.Errorf("lost %v, text %q", c.Lost, c.LostText)
	}
	for _, s := range c.Sparks {
		if s.Now != noValue {
			t.Errorf("a lost GPU shows its stale %s %q", s.Name, s.Now)
		}
	}
	lost.GPUErr = ""
	if c := gpuCardVM(cfg, lost, workerView{}); c.LostText != "GPU lost: the driver gave no reason" {
		t.Errorf("lost without words: %q", c.LostText)
	}
}

func TestSamplerForgetsGoneWorkersTelemetry(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{engines: []Engine{
		{Worker: "w0", UtilizationPct: 50, TemperatureC: 60, PowerDrawW: 200},
		{Worker: "w1", UtilizationPct: 70, TemperatureC: 61, PowerDrawW: 250},
	}}
	s := newSampler(cfg, Deps{Engines: src})
	now := t0
	for range 3 {
		now = now.Add(cfg.Interval)
		s.collect(t.Context(), now, true)
	}
	if s.history["w1"].gpu.held != 3 {
		t.Fatalf("w1 holds %d samples, want 3", s.history["w1"].gpu.held)
	}
	// The source fails: that says nothing about w1, whose readings stay.
	src.update(func(f *fakeSources) { f.enginesErr = errors.New("nvml: driver not loaded") })
	now = now.Add(cfg.Interval)
	s.collect(t.Context(), now, true)
	if s.history["w1"].gpu == nil {
		t.Fatal("a failed read forgot w1's readings")
	}
	// The source stops listing w1: its readings go at once.
	src.update(func(f *fakeSources) { f.enginesErr, f.engines = nil, f.engines[:1] })
	now = now.Add(cfg.Interval)
	snap := s.collect(t.Context(), now, true)
	if h := s.history["w1"]; h != nil && h.gpu != nil {
		t.Error("w1's readings outlived the worker")
	}
	if g := snap.workers["w1"].gpu; g.utilPct != nil {
		t.Error("the snapshot still draws w1")
	}
	// After the chart window every ring is still its fixed size, and w1 is
	// gone altogether.
	for range int(cfg.ChartWindow/cfg.Interval) + 1 {
		now = now.Add(cfg.Interval)
		s.collect(t.Context(), now, true)
	}
	if h := s.history["w0"].gpu; len(h.samples) != cfg.TelemetrySamples || h.held != cfg.TelemetrySamples {
		t.Errorf("w0 ring %d long holding %d", len(h.samples), h.held)
	}
	if _, ok := s.history["w1"]; ok {
		t.Error("w1 still has a history after the chart window")
	}
}

var sparkRE = regexp.MustCompile(`class="sparkline (spark-[a-z]+)"[^>]*>(?:<title>[^<]*</title>)?((?:<polyline points="[^"]*"></polyline>)+)`)

// cardSparks returns each card's sparklines, by card id and line class.
func cardSparks(t *testing.T, page string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, card := range strings.Split(page, "<article ")[1:] {
		id := regexp.MustCompile(`id="([^"]+)"`).FindStringSubmatch(card)[1]
		out[id] = map[string]string{}
		for _, m := range sparkRE.FindAllStringSubmatch(card, -1) {
			out[id][m[1]] = m[2]
		}
	}
	return out
}

func TestGPUCardsShowLiveTelemetry(t *testing.T) {
	src := &fakeSources{engines: []Engine{
		{Worker: "rig0-gpu0", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", MemoryUsed: 20 * gib, MemoryTotal: 24 * gib,
			UtilizationPct: 10, TemperatureC: 40, PowerDrawW: 100, PowerLimitW: 450,
			MemoryByOwnerKnown: true, MemoryHearth: 19 * gib},
		{Worker: "rig0-gpu1", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", MemoryUsed: 22 * gib, MemoryTotal: 24 * gib,
			UtilizationPct: 90, TemperatureC: 70, PowerDrawW: 400, PowerLimitW: 450,
			MemoryByOwnerKnown: true, MemoryHearth: 15 * gib, MemoryOther: 6 * gib,
			OtherProcesses: []GPUProcess{{Name: "python3", PID: 4242, UsedBytes: 6 * gib}},
			PlanNote:       "another program holds 6.0 GiB: context cut to 16,384 tokens"},
	}}
	h := newHarness(t, src, withKeyRequired(false))
	step := func(i int) {
		src.update(func(f *fakeSources) {
			for j := range f.engines {
				e := &f.engines[j]
				e.UtilizationPct = (e.UtilizationPct + 7*i) % 100
				e.TemperatureC = 40 + (e.TemperatureC+i)%40
				e.PowerDrawW = float64(100 + (int(e.PowerDrawW)+31*i)%300)
			}
		})
		h.tick(h.c.cfg.Interval)
	}

	// Before any tick the cards show the latest figures, but no lines.
	_, page := h.do(t, request{path: "/console/"})
	for id, sparks := range cardSparks(t, page) {
		if len(sparks) != 0 {
			t.Errorf("%s draws %v before any sample", id, sparks)
		}
	}
	for i := range 5 {
		step(i)
	}
	_, page = h.do(t, request{path: "/console/"})
	before := cardSparks(t, page)
	if len(before) != 2 {
		t.Fatalf("%d cards, want 2", len(before))
	}
	for id, sparks := range before {
		for _, class := range []string{"spark-util", "spark-temp", "spark-power", "spark-mem"} {
			if sparks[class] == "" {
				t.Errorf("%s lacks its %s sparkline", id, class)
			}
		}
	}
	text := html.UnescapeString(page)
	for _, want := range []string{"python3 (pid 4242) 6.0 GiB", "other programs 6.0 GiB", "context cut to 16,384 tokens", "Hearth 19.0 GiB"} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	for i := 5; i < 8; i++ {
		step(i)
	}
	_, page = h.do(t, request{path: "/console/"})
	after := cardSparks(t, page)
	for id, sparks := range after {
		for class, line := range sparks {
			if line == before[id][class] && class != "spark-mem" {
				t.Errorf("%s %s did not move after three ticks", id, class)
			}
		}
	}
	if after[domID("gpu-", "rig0-gpu0")]["spark-util"] == "" {
		t.Error("the first card lost its sparkline")
	}
}

func TestLostGPUCard(t *testing.T) {
	src := &fakeSources{engines: []Engine{
		{Worker: "rig0-gpu0", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", State: "ready",
			MemoryUsed: 20 * gib, MemoryTotal: 24 * gib, UtilizationPct: 50, TemperatureC: 60, PowerDrawW: 250, PowerLimitW: 450},
		{Worker: "rig0-gpu1", Node: "rig0", GPU: "NVIDIA GeForce RTX 4090", State: "ready",
			MemoryUsed: 20 * gib, MemoryTotal: 24 * gib, UtilizationPct: 50, TemperatureC: 60, PowerDrawW: 250, PowerLimitW: 450},
	}}
	h := newHarness(t, src, withKeyRequired(false))
	for range 3 {
		h.tick(h.c.cfg.Interval)
	}
	src.update(func(f *fakeSources) {
		e := &f.engines[1]
		e.GPULost, e.GPUErr, e.State = true, "nvml: GPU is lost (ERROR_GPU_IS_LOST)", "stopped"
	})
	h.tick(h.c.cfg.Interval)
	_, page := h.do(t, request{path: "/console/"})
	lostID, okID := domID("gpu-", "rig0-gpu1"), domID("gpu-", "rig0-gpu0")
	if !strings.Contains(page, `<article class="card gpu-lost" id="`+lostID+`"`) {
		t.Errorf("the lost GPU's card is not marked gpu-lost")
	}
	if !strings.Contains(page, `<article class="card" id="`+okID+`"`) {
		t.Errorf("the healthy GPU's card changed class")
	}
	if n := strings.Count(page, `class="card gpu-lost"`); n != 1 {
		t.Errorf("%d cards marked lost, want 1", n)
	}
	text := html.UnescapeString(page)
	if !strings.Contains(text, `role="alert" data-label="gpu-lost">GPU lost: nvml: GPU is lost (ERROR_GPU_IS_LOST)</p>`) {
		t.Errorf("the card does not say why the GPU is lost")
	}
	lostCard := text[strings.Index(text, lostID):]
	lostCard = lostCard[:strings.Index(lostCard, "</article>")]
	if strings.Contains(lostCard, `spark-now">50%`) || strings.Contains(lostCard, "20.0 / 24.0 GiB") {
		t.Error("the lost card shows its last figures as current")
	}
	checkGolden(t, "overview-gpu-lost.html", []byte(page))

	// It comes back after a driver reset.
	src.update(func(f *fakeSources) {
		e := &f.engines[1]
		e.GPULost, e.GPUErr, e.State = false, "", "ready"
	})
	h.tick(h.c.cfg.Interval)
	_, page = h.do(t, request{path: "/console/"})
	if strings.Contains(page, "gpu-lost") || strings.Contains(page, "GPU lost") {
		t.Error("the card stays red after the GPU returned")
	}
}

func TestFmtSVG(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {3, "3"}, {58.5, "58.5"}, {58.46, "58.5"}, {117.04, "117"}, {0.05, "0.1"},
		{-1.25, "-1.3"}, {-0.04, "0"}, {1234567.89, "1234567.9"}, {math.Inf(1), "+Inf"}, {math.NaN(), "NaN"},
	}
	for _, tc := range tests {
		if got := fmtSVG(tc.in); got != tc.want {
			t.Errorf("fmtSVG(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// The same figures as formatting the rounded float, across a view box.
	for i := range 30_000 {
		f := float64(i) * 0.0137
		want := strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
		if got := fmtSVG(f); got != want {
			t.Fatalf("fmtSVG(%v) = %q, want %q", f, got, want)
		}
	}
}
