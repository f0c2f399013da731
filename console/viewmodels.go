package console

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearth-llm/hearth/console/components"
)

// overviewVM computes the overview page from a snapshot.
func overviewVM(cfg Config, snap *snapshot) components.OverviewVM {
	vm := components.OverviewVM{Totals: totalsVM(cfg, snap), Layout: cfg.Layout, LayoutReason: cfg.LayoutReason, Models: modelsVM(cfg, snap)}
	if snap.enginesErr != nil {
		vm.Err = "Cannot read the engines: " + snap.enginesErr.Error()
	}
	storeOf := make(map[string]*KVStore, len(snap.stores))
	for i := range snap.stores {
		storeOf[snap.stores[i].Node] = &snap.stores[i]
	}
	vm.GPUs = make([]components.GPUCard, 0, len(snap.engines))
	for _, e := range snap.engines {
		w, sampled := snap.workers[e.Worker]
		card := gpuCardVM(cfg, e, w)
		if !sampled {
			w.tiers = unknownTiers
		}
		card.Tiers = tiersVM(cfg, e, w.tiers, storeOf[e.Node])
		vm.GPUs = append(vm.GPUs, card)
	}
	if snap.storesErr != nil {
		vm.StoresErr = "Cannot read the SSD stores: " + snap.storesErr.Error()
	}
	vm.Stores = make([]components.StoreCard, 0, len(snap.stores))
	for i := range snap.stores {
		st := &snap.stores[i]
		v, sampled := snap.storeViews[st.Node]
		if !sampled {
			v = unknownStore
		}
		vm.Stores = append(vm.Stores, storeCardVM(cfg, st, v))
	}
	return vm
}

// unknownTiers and unknownStore are the figures of a worker or store the
// sampler has no history of yet.
var (
	unknownTiers = tierView{
		gpuShare: math.NaN(), ramShare: math.NaN(), diskShare: math.NaN(),
		loadedPerSec: math.NaN(), storedPerSec: math.NaN(),
	}
	unknownStore = storeView{hitRate: math.NaN(), readPerSec: math.NaN(), writePerSec: math.NaN()}
)

// tiersVM lays out an engine's tiers: how full each is and where its
// prompt tokens came from. store is its node's SSD store, nil when none.
// An engine with neither a RAM tier nor a store, and no tokens loaded from
// either, has no tiers to show.
func tiersVM(cfg Config, e Engine, v tierView, store *KVStore) components.Tiers {
	hasRAM := e.RAMTotalBlocks > 0
	hasSSD := store != nil || e.DiskHitTokens > 0
	if !hasRAM && !hasSSD && e.RAMHitTokens <= 0 && e.LoadedBytes <= 0 && e.StoredBytes <= 0 {
		return components.Tiers{}
	}
	t := components.Tiers{
		Shown:  true,
		Window: fmtWindow(cfg.StatsWindow),
		Loaded: fmtByteRate(v.loadedPerSec),
		Stored: fmtByteRate(v.storedPerSec),
	}
	gpu := components.TierBar{Name: "GPU", Class: "tier-gpu", Text: "size not reported"}
	if e.TotalBlocks > 0 {
		// Blocks holding KV: those of running requests and the reusable
		// ones.
		held := min(max(e.UsedBlocks, 0)+max(e.CachedFreeBlocks, 0), e.TotalBlocks)
		gpu = blockBar("GPU", "tier-gpu", held, e.TotalBlocks)
	}
	t.Bars = append(t.Bars, gpu)
	if hasRAM {
		t.Bars = append(t.Bars, blockBar("RAM", "tier-ram", min(max(e.RAMUsedBlocks, 0), e.RAMTotalBlocks), e.RAMTotalBlocks))
	}
	if store != nil {
		t.Bars = append(t.Bars, storeBar(store))
	}
	t.Shares = tierSharesVM(v, e.RAMTotalBlocks > 0 || e.RAMHitTokens > 0, hasSSD)
	return t
}

// blockBar draws a tier measured in blocks.
func blockBar(name, class string, used, total int) components.TierBar {
	share := float64(used) / float64(total)
	b := components.TierBar{
		Name: name, Class: class, Known: true,
		UsedW: fmtSVG(share * components.BarWidth),
		Pct:   fmtPct(share),
		Text:  strconv.Itoa(used) + " / " + strconv.Itoa(total) + " blocks",
	}
	b.Label = name + " KV tier: " + b.Pct + " full, " + b.Text
	return b
}

// storeBar draws a node's SSD store, which its engines share. A store
// without a known capacity has no bar, only its size.
func storeBar(st *KVStore) components.TierBar {
	used := max(st.UsedBytes, 0)
	b := components.TierBar{Name: "SSD", Class: "tier-ssd", Shared: true, Text: fmtBytes(float64(used)) + ", no capacity set"}
	if st.CapacityBytes > 0 {
		share := min(float64(used)/float64(st.CapacityBytes), 1)
		b.Known = true
		b.UsedW = fmtSVG(share * components.BarWidth)
		b.Pct = fmtPct(share)
		b.Text = fmtBytes(float64(used)) + " / " + fmtBytes(float64(st.CapacityBytes))
	}
	b.Label = "SSD KV store of " + st.Node + ", shared by its engines: " + b.Text
	if b.Pct != "" {
		b.Label += ", " + b.Pct + " full"
	}
	return b
}

// tierSharesVM stacks GPU hits, RAM loads and SSD loads from the left;
// the rest of the bar is recomputed tokens.
func tierSharesVM(v tierView, hasRAM, hasSSD bool) components.TierShares {
	s := components.TierShares{
		HasRAM: hasRAM, HasSSD: hasSSD,
		GPU: noValue, RAM: noValue, SSD: noValue, Recomputed: noValue,
	}
	if math.IsNaN(v.gpuShare) {
		s.Label = "Prompt tokens: none looked up yet"
		return s
	}
	s.Known = true
	gpuW := v.gpuShare * components.BarWidth
	ramW := v.ramShare * components.BarWidth
	ssdW := v.diskShare * components.BarWidth
	s.GPUW = fmtSVG(gpuW)
	s.RAMX, s.RAMW = fmtSVG(gpuW), fmtSVG(ramW)
	s.SSDX, s.SSDW = fmtSVG(gpuW+ramW), fmtSVG(ssdW)
	s.GPU, s.RAM, s.SSD = fmtPct(v.gpuShare), fmtPct(v.ramShare), fmtPct(v.diskShare)
	s.Recomputed = fmtPct(max(1-v.gpuShare-v.ramShare-v.diskShare, 0))
	s.Label = "Prompt tokens: " + s.GPU + " hit in the GPU cache"
	if hasRAM {
		s.Label += ", " + s.RAM + " loaded from RAM"
	}
	if hasSSD {
		s.Label += ", " + s.SSD + " loaded from SSD"
	}
	s.Label += ", " + s.Recomputed + " recomputed"
	return s
}

// storeCardVM is one node's SSD store panel.
func storeCardVM(cfg Config, st *KVStore, v storeView) components.StoreCard {
	c := components.StoreCard{
		DOMID:    domID("store-", st.Node),
		Node:     st.Node,
		Dir:      st.Dir,
		Bar:      storeBar(st),
		Blocks:   strconv.Itoa(max(st.Blocks, 0)),
		FreeDisk: valueOr(st.FreeDiskBytes >= 0, fmtBytes(float64(st.FreeDiskBytes))),
		Window:   fmtWindow(cfg.StatsWindow),
		HitRate:  fmtPct(v.hitRate),
		Read:     fmtByteRate(v.readPerSec),
		Write:    fmtByteRate(v.writePerSec),
		Evicted:  strconv.FormatInt(v.evicted, 10),
		Corrupt:  strconv.FormatInt(v.corrupt, 10),
		Err:      st.Err,
	}
	c.CorruptSeen = v.corrupt > 0
	c.Bar.Shared = false // the panel is the store itself
	return c
}

func totalsVM(cfg Config, snap *snapshot) components.Totals {
	t := components.Totals{
		Window:  fmtWindow(cfg.StatsWindow),
		Queued:  snap.queue,
		HitRate: fmtPct(snap.cluster.hitRate),
	}
	for _, e := range snap.engines {
		t.Running += e.Running
		t.Waiting += e.Waiting
	}

	prefillRate := make(map[string]float64, len(snap.engines))
	for _, e := range snap.engines {
		if e.PrefillTokensPerSec > 0 {
			prefillRate[e.Worker] = e.PrefillTokensPerSec
		}
	}
	lastMinute := snap.at.Add(-time.Minute)
	windowStart := snap.at.Add(-cfg.StatsWindow)
	var recent int
	var saved float64
	ttfts := make([]time.Duration, 0, len(snap.requests))
	for _, r := range snap.requests {
		if r.At.Before(windowStart) || r.At.After(snap.at) {
			continue
		}
		if !r.At.Before(lastMinute) {
			recent++
		}
		if r.TTFT > 0 {
			ttfts = append(ttfts, r.TTFT)
		}
		if r.CachedTokens > 0 {
			rate, ok := prefillRate[r.Worker]
			if !ok {
				rate = cfg.PrefillTokensPerSec
			}
			saved += float64(r.CachedTokens) / rate
		}
	}
	t.RequestsPerSec = fmtRate(float64(recent) / time.Minute.Seconds())
	slices.Sort(ttfts)
	t.TTFTP50 = fmtLatency(percentile(ttfts, 0.50))
	t.TTFTP90 = fmtLatency(percentile(ttfts, 0.90))
	t.PrefillSaved = fmtSeconds(saved)
	if snap.trafficErr != nil && snap.routerErr != nil {
		t.Err = "Cannot read traffic or router: " + snap.trafficErr.Error() + "; " + snap.routerErr.Error()
	} else if snap.trafficErr != nil {
		t.Err = "Cannot read traffic: " + snap.trafficErr.Error()
	} else if snap.routerErr != nil {
		t.Err = "Cannot read the router: " + snap.routerErr.Error()
	}
	return t
}

// percentile is the nearest-rank percentile of sorted values; 0 for none.
func percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func fmtWindow(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return strconv.Itoa(int(d/time.Second)) + " s"
}

func gpuCardVM(cfg Config, e Engine, w workerView) components.GPUCard {
	c := components.GPUCard{
		DOMID:         domID("gpu-", e.Worker),
		Worker:        e.Worker,
		Node:          e.Node,
		GPU:           gpuLabel(e),
		Model:         e.Model,
		Image:         e.Image,
		Running:       e.Running,
		Waiting:       e.Waiting,
		TokensPerSec:  noValue,
		KV:            kvBarVM(e),
		Chart:         hitChartVM(cfg, w.chart),
		State:         e.State,
		StateClass:    stateClass(e.State),
		LogTail:       e.LogTail,
		LoadPhase:     e.LoadPhase,
		LoadText:      e.LoadPhase,
		Diagnosis:     e.Diagnosis,
		PlanNote:      e.PlanNote,
		TokenizerNote: e.TokenizerNote,
		KVEventsNote:  e.KVEventsNote,
		Err:           e.Err,
	}
	if e.LoadPhase != "" && e.LoadProgress >= 0 {
		pct := min(e.LoadProgress, 100)
		c.LoadPct, c.LoadValue = strconv.Itoa(pct)+"%", strconv.Itoa(pct)
		c.LoadText += " " + c.LoadPct
	}
	if w.chart != nil {
		c.TokensPerSec = fmtRate(w.tokensPerSec)
	}
	if e.MemoryTotal > 0 {
		used := "?"
		if e.MemoryUsed > 0 {
			used = fmtGiB(e.MemoryUsed)
			c.MemoryPct = float64(e.MemoryUsed) / float64(e.MemoryTotal)
		}
		c.Memory = used + " / " + fmtGiB(e.MemoryTotal) + " GiB"
		if e.MemoryReserved && e.MemoryUsed > 0 {
			c.Memory = "reserved by the engine: " + used + " of " + fmtGiB(e.MemoryTotal) + " GiB"
			if e.MemoryInUse > 0 {
				c.MemoryInUse = fmtGiB(e.MemoryInUse) + " GiB: weights and KV in use"
			}
		}
	}
	c.MemoryBar = memoryBarVM(e)
	c.Sparks, c.TelemetryKnown = sparksVM(cfg, e, w.gpu)
	c.SparkWindow = fmtWindow(time.Duration(cfg.TelemetrySamples) * cfg.Interval)
	if e.GPULost {
		c.Lost = true
		c.LostText = "GPU lost: " + cmp.Or(e.GPUErr, "the driver gave no reason")
		c.Memory, c.MemoryPct, c.MemoryInUse = "", 0, "" // whatever the source repeats is stale
	}
	return c
}

// kvBarVM lays out the cache bar: running requests' blocks from the left,
// then cached reusable blocks, then empty ones. Counts are clamped so that
// an engine reporting inconsistent numbers still draws inside the bar.
func kvBarVM(e Engine) components.KVBar {
	if e.TotalBlocks <= 0 {
		return components.KVBar{}
	}
	total := e.TotalBlocks
	used := min(max(e.UsedBlocks, 0), total)
	cached := min(max(e.CachedFreeBlocks, 0), total-used)
	empty := total - used - cached
	scale := float64(components.BarWidth) / float64(total)
	usedW := float64(used) * scale
	cachedW := float64(cached) * scale
	b := components.KVBar{
		Known:      true,
		Total:      total,
		Used:       used,
		CachedFree: cached,
		Empty:      empty,
		UsedW:      fmtSVG(usedW),
		CachedX:    fmtSVG(usedW),
		CachedW:    fmtSVG(cachedW),
		EmptyX:     fmtSVG(usedW + cachedW),
		EmptyW:     fmtSVG(float64(components.BarWidth) - usedW - cachedW),
		UsedPct:    fmtPct(float64(used) / float64(total)),
		CachedPct:  fmtPct(float64(cached) / float64(total)),
		EmptyPct:   fmtPct(float64(empty) / float64(total)),
	}
	b.Label = "KV cache: " + b.UsedPct + " held by running requests, " + b.CachedPct +
		" cached and reusable, " + b.EmptyPct + " empty, of " + strconv.Itoa(total) + " blocks"
	return b
}

// hitChartVM turns chart points into polylines; a bucket without data (the
// engine was not read: the sampler holds the line through idle ones)
// breaks the line rather than drawing a misleading zero.
func hitChartVM(cfg Config, points []chartPoint) components.HitChart {
	c := components.HitChart{
		Since:        "−" + fmtWindow(cfg.ChartWindow),
		PredictedNow: noValue,
		MeasuredNow:  noValue,
	}
	c.Predicted = polylines(points, func(p chartPoint) float64 { return p.predicted })
	c.Measured = polylines(points, func(p chartPoint) float64 { return p.measured })
	for _, p := range points {
		if !math.IsNaN(p.predicted) {
			c.PredictedNow = fmtPct(p.predicted)
		}
		if !math.IsNaN(p.measured) {
			c.MeasuredNow = fmtPct(p.measured)
		}
	}
	c.Empty = len(c.Predicted) == 0 && len(c.Measured) == 0
	c.Label = "Prefix cache hit rate over the last " + fmtWindow(cfg.ChartWindow) +
		": measured " + c.MeasuredNow + ", predicted by the router " + c.PredictedNow
	return c
}

func polylines(points []chartPoint, value func(chartPoint) float64) []string {
	box := plotBox{
		left: components.PlotLeft, right: components.PlotRight,
		top: components.PlotTop, bottom: components.PlotBottom,
	}
	return plotLines(len(points), func(i int) float64 { return value(points[i]) }, 0, 1, box)
}

// plotBox is where a line is drawn in its view box.
type plotBox struct{ left, right, top, bottom float64 }

// sparkBox is the plot area of a sparkline.
var sparkBox = plotBox{
	left: 0, right: components.SparkWidth - components.SparkPad,
	top: components.SparkPad, bottom: components.SparkHeight - components.SparkPad,
}

// sparkline draws evenly spaced values, oldest first, scaled so that lo is
// the bottom of the box and hi its top. NaN values are unknown and break
// the line; none known gives no line.
func sparkline(values []float64, lo, hi float64) []string {
	return plotLines(len(values), func(i int) float64 { return values[i] }, lo, hi, sparkBox)
}

// plotLines turns n evenly spaced values into polyline point lists in box,
// clamped to lo..hi; a NaN breaks the line rather than drawing a
// misleading zero.
func plotLines(n int, value func(int) float64, lo, hi float64, box plotBox) []string {
	var lines []string
	// One buffer for every point of the line; a page draws thousands.
	buf := make([]byte, 0, 12*n)
	inLine := 0 // points in the current line
	step := (box.right - box.left) / float64(max(n-1, 1))
	height := box.bottom - box.top
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	point := func(x, y float64) {
		if inLine > 0 {
			buf = append(buf, ' ')
		}
		buf = appendSVG(buf, x)
		buf = append(buf, ',')
		buf = appendSVG(buf, y)
	}
	flush := func(lastX, lastY float64) {
		if inLine == 1 {
			// A lone point would not draw; make it a short dash.
			point(lastX+3, lastY)
		}
		if inLine > 0 {
			lines = append(lines, string(buf))
		}
		buf = buf[:0]
		inLine = 0
	}
	var lastX, lastY float64
	for i := range n {
		v := value(i)
		if math.IsNaN(v) {
			flush(lastX, lastY)
			continue
		}
		v = min(max((v-lo)/span, 0), 1)
		x := box.left + step*float64(i)
		y := box.bottom - height*v
		point(x, y)
		inLine++
		lastX, lastY = x, y
	}
	flush(lastX, lastY)
	return lines
}

// sparksVM draws a worker's GPU readings. Utilisation has a fixed 0–100%
// scale; temperature, power and memory start at zero and reach the
// highest of their limit and what was read, so that a line's height means
// the same from one tick to the next.
func sparksVM(cfg Config, e Engine, g gpuSeries) (sparks []components.Sparkline, known bool) {
	window := fmtWindow(time.Duration(cfg.TelemetrySamples) * cfg.Interval)
	// A lost GPU's last figures are stale, whatever the source repeats.
	reads := !e.GPULost
	memNow := valueOr(reads && e.MemoryUsed > 0 && !e.MemoryReserved, fmtGiB(e.MemoryUsed)+" GiB")
	powerNow := valueOr(reads && e.PowerDrawW >= 0, fmtWatts(e.PowerDrawW))
	if powerNow != noValue && e.PowerLimitW > 0 {
		powerNow = strconv.FormatFloat(math.Round(e.PowerDrawW), 'f', 0, 64) + " / " + fmtWatts(e.PowerLimitW)
	}
	specs := []struct {
		name, class, now string
		values           []float64
		hi               float64
	}{
		{"Util", "spark-util", valueOr(reads && e.UtilizationPct >= 0, strconv.Itoa(e.UtilizationPct)+"%"), g.utilPct, 100},
		{"Temp", "spark-temp", valueOr(reads && e.TemperatureC >= 0, strconv.Itoa(e.TemperatureC)+" °C"), g.tempC, 100},
		{"Power", "spark-power", powerNow, g.powerW, e.PowerLimitW},
		{"VRAM", "spark-mem", memNow, g.memUsed, float64(e.MemoryTotal)},
	}
	sparks = make([]components.Sparkline, 0, len(specs))
	for _, sp := range specs {
		hi := sp.hi
		for _, v := range sp.values {
			if !math.IsNaN(v) {
				hi = max(hi, v)
			}
		}
		lines := sparkline(sp.values, 0, hi)
		known = known || len(lines) > 0 || sp.now != noValue
		sparks = append(sparks, components.Sparkline{
			Name: sp.name, Class: sp.class, Now: sp.now, Lines: lines,
			Label: sp.name + " over the last " + window + ", now " + sp.now,
		})
	}
	return sparks, known
}

func valueOr(known bool, s string) string {
	if !known {
		return noValue
	}
	return s
}

// memoryBarVM lays out a GPU's memory by owner. Figures are clamped so that
// a source reporting inconsistent numbers (processes read a moment apart
// from the total) still draws inside the bar.
func memoryBarVM(e Engine) components.MemoryBar {
	if !e.MemoryByOwnerKnown || e.MemoryTotal == 0 {
		return components.MemoryBar{}
	}
	total := e.MemoryTotal
	hearth := min(e.MemoryHearth, total)
	other := min(e.MemoryOther, total-hearth)
	used := min(max(e.MemoryUsed, hearth+other), total)
	driver := used - hearth - other
	free := total - used
	scale := float64(components.BarWidth) / float64(total)
	hearthW, otherW, driverW := float64(hearth)*scale, float64(other)*scale, float64(driver)*scale
	b := components.MemoryBar{
		Known:   true,
		HearthW: fmtSVG(hearthW),
		OtherX:  fmtSVG(hearthW),
		OtherW:  fmtSVG(otherW),
		DriverX: fmtSVG(hearthW + otherW),
		DriverW: fmtSVG(driverW),
		Hearth:  fmtGiB(hearth),
		Other:   fmtGiB(other),
		Free:    fmtGiB(free),
		Total:   fmtGiB(total),
	}
	if fmtGiB(driver) != fmtGiB(0) {
		b.Driver = fmtGiB(driver)
	}
	b.Others = make([]string, 0, len(e.OtherProcesses))
	for _, p := range e.OtherProcesses {
		name := cmp.Or(p.Name, "unnamed") + " (pid " + strconv.Itoa(p.PID) + ")"
		if p.UsedBytes > 0 {
			name += " " + fmtGiB(p.UsedBytes) + " GiB"
		}
		b.Others = append(b.Others, name)
	}
	b.Label = "GPU memory: Hearth " + b.Hearth + " GiB, other programs " + b.Other + " GiB"
	if b.Driver != "" {
		b.Label += ", driver " + b.Driver + " GiB"
	}
	b.Label += ", free " + b.Free + " GiB, of " + b.Total + " GiB"
	if len(b.Others) > 0 {
		b.Label += " (other programs: " + strings.Join(b.Others, ", ") + ")"
	}
	return b
}

// sessionsVM lists the most recently active sessions with their latest
// turns, marking the turns that diverged and listing side requests apart.
func sessionsVM(cfg Config, snap *snapshot) components.SessionsVM {
	vm := components.SessionsVM{Total: len(snap.sessions)}
	if snap.trafficErr != nil {
		vm.Err = "Cannot read sessions: " + snap.trafficErr.Error()
	}
	order := make([]int, len(snap.sessions))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		sa, sb := &snap.sessions[a], &snap.sessions[b]
		if c := sb.LastActive.Compare(sa.LastActive); c != 0 {
			return c
		}
		return strings.Compare(sa.ID, sb.ID)
	})
	order = order[:min(len(order), cfg.SessionsShown)]
	vm.Rows = make([]components.SessionRow, 0, len(order))
	for _, i := range order {
		vm.Rows = append(vm.Rows, sessionRowVM(cfg, snap.at, &snap.sessions[i]))
	}
	return vm
}

func sessionRowVM(cfg Config, now time.Time, s *Session) components.SessionRow {
	row := components.SessionRow{
		DOMID:     domID("s-", s.ID),
		ID:        s.ID,
		Client:    cmp.Or(s.Client, "unknown"),
		Worker:    cmp.Or(s.Worker, noValue),
		Idle:      fmtAgo(now.Sub(s.LastActive)),
		Context:   noValue,
		LastShare: noValue,
	}
	var turns, sides []*Turn
	for i := range s.Turns {
		if t := &s.Turns[i]; t.Kind == TurnKindSide {
			sides = append(sides, t)
		} else {
			turns = append(turns, t)
		}
	}
	row.Turns, row.Sides = len(turns), len(sides)
	first := max(len(turns)-cfg.TurnsShown, 0)
	row.HiddenTurns = first
	row.TurnRows = make([]components.TurnRow, 0, len(turns)-first)
	for i, t := range turns {
		share := cachedShare(t)
		if t.Diverged {
			row.Busted++
		}
		if i == len(turns)-1 {
			row.Context = fmtTokens(max(t.PromptTokens, 0))
			row.LastShare = fmtPct(share)
			row.LastLow = t.Diverged
		}
		if i >= first {
			row.TurnRows = append(row.TurnRows, turnRowVM(cfg, i+1, t, share))
		}
	}
	firstSide := max(len(sides)-cfg.TurnsShown, 0)
	row.HiddenSides = firstSide
	for _, t := range sides[firstSide:] {
		row.SideRows = append(row.SideRows, components.SideRow{
			At:     t.At.In(cfg.Location).Format("15:04:05"),
			Prompt: fmtTokens(max(t.PromptTokens, 0)),
			Cached: fmtTokens(min(max(t.CachedTokens, 0), max(t.PromptTokens, 0))),
			Output: fmtTokens(max(t.OutputTokens, 0)),
			Worker: cmp.Or(t.Worker, noValue),
		})
	}
	return row
}

// cachedShare is the part of a turn's prompt served from the cache, NaN
// when the prompt's size is unknown.
func cachedShare(t *Turn) float64 {
	if t.PromptTokens <= 0 {
		return math.NaN()
	}
	return float64(min(max(t.CachedTokens, 0), t.PromptTokens)) / float64(t.PromptTokens)
}

func turnRowVM(cfg Config, n int, t *Turn, share float64) components.TurnRow {
	cached := min(max(t.CachedTokens, 0), max(t.PromptTokens, 0))
	fresh := max(t.PromptTokens, 0) - cached
	r := components.TurnRow{
		N:      n,
		At:     t.At.In(cfg.Location).Format("15:04:05"),
		Prompt: fmtTokens(max(t.PromptTokens, 0)),
		Cached: fmtTokens(cached),
		New:    fmtTokens(fresh),
		Share:  fmtPct(share),
		Busted: t.Diverged,
	}
	cachedW := 0.0
	if t.PromptTokens > 0 {
		cachedW = float64(components.TurnBarWidth) * float64(cached) / float64(t.PromptTokens)
	}
	r.CachedW = fmtSVG(cachedW)
	r.NewX = fmtSVG(cachedW)
	r.NewW = fmtSVG(float64(components.TurnBarWidth) - cachedW)
	if t.PromptTokens == 0 {
		r.NewW = "0"
	}
	if t.Diverged {
		r.Diverged = divergedText(t)
		r.ChangedFrom, r.ChangedTo = t.ChangedFrom, t.ChangedTo
	}
	return r
}

// divergedText says where and why a turn lost its cached prefix.
func divergedText(t *Turn) string {
	block := strconv.Itoa(t.DivergedBlock)
	switch t.Cause {
	case "evicted":
		return "diverged at block " + block + ": evicted from the GPU"
	case "routed_elsewhere":
		return "diverged at block " + block + ": routed to " + cmp.Or(t.Worker, "another worker") + ", which did not have it"
	case "prompt_changed":
		return "prompt changed at block " + block
	}
	return "diverged at block " + block
}

// requestsVM lists the latest routing decisions.
func requestsVM(cfg Config, snap *snapshot) components.RequestsVM {
	vm := components.RequestsVM{Queue: snap.queue}
	if snap.routerErr != nil {
		vm.Err = "Cannot read the router: " + snap.routerErr.Error()
	}
	byID := make(map[string]*Request, len(snap.requests))
	for i := range snap.requests {
		byID[snap.requests[i].ID] = &snap.requests[i]
	}
	models := make(map[string]string, len(snap.engines))
	for _, e := range snap.engines {
		models[e.Worker] = e.Model
	}
	vm.OutputEstimate = outputEstimateNote(snap.requests)
	vm.Rows = make([]components.DecisionRow, 0, len(snap.decisions))
	for _, d := range snap.decisions {
		row := components.DecisionRow{
			DOMID:     domID("d-", d.RequestID+"@"+strconv.FormatInt(d.At.UnixNano(), 36)),
			At:        d.At.In(cfg.Location).Format("15:04:05.000"),
			RequestID: d.RequestID,
			Policy:    d.Policy,
			Winner:    d.Worker,
			Reason:    d.Reason,
			Predicted: fmtPct(d.PredictedHitRate),
			Blocks:    strconv.Itoa(d.CachedBlocks) + " / " + strconv.Itoa(d.PromptBlocks) + " blocks cached",
			Client:    noValue,
			Session:   noValue,
			Model:     cmp.Or(models[d.Worker], noValue),
			TTFT:      noValue,
			Hints:     noValue,
			Output:    noValue,
		}
		if r := byID[d.RequestID]; r != nil {
			row.Output = outputCell(r)
			row.Client = cmp.Or(r.Client, "unknown")
			if r.SessionID != "" {
				row.Session, row.SessionFull = shortID(r.SessionID), r.SessionID
			}
			if r.TTFT > 0 {
				row.TTFT = fmtLatency(r.TTFT)
			}
			row.Hints = cmp.Or(r.Hints, noValue)
		}
		if d.PromptBlocks == 0 {
			row.Predicted = noValue
		}
		if d.Queued >= time.Millisecond {
			row.Queued = fmtLatency(d.Queued)
		}
		row.Candidates = make([]components.CandidateRow, 0, len(d.Candidates))
		for _, c := range d.Candidates {
			row.Candidates = append(row.Candidates, components.CandidateRow{
				Worker:  c.Worker,
				Overlap: c.CachedBlocks,
				Active:  c.ActiveBlocks,
				Pending: c.PendingPrefillTokens,
				Cost:    strconv.FormatFloat(c.Cost, 'f', 2, 64),
				Winner:  c.Worker == d.Worker,
			})
		}
		vm.Rows = append(vm.Rows, row)
	}
	return vm
}

// outputCell is a request's output beside the length it was routed with:
// "170 tokens (expected 183)".
func outputCell(r *Request) string {
	out := strconv.Itoa(r.OutputTokens) + " tokens"
	if r.PredictedOutputTokens > 0 {
		out += " (expected " + strconv.Itoa(r.PredictedOutputTokens) + ")"
	}
	return out
}

// outputEstimateNote says how far the expected output lengths of the
// finished requests were from their answers: p50 and p90 of
// |expected − actual| / actual; "" when none had one.
func outputEstimateNote(reqs []Request) string {
	var rel []float64
	for _, r := range reqs {
		if r.PredictedOutputTokens > 0 && r.OutputTokens > 0 && r.TTFT > 0 {
			rel = append(rel, math.Abs(float64(r.PredictedOutputTokens-r.OutputTokens))/float64(r.OutputTokens))
		}
	}
	if len(rel) == 0 {
		return ""
	}
	slices.Sort(rel)
	return "Expected output length against the answers: error p50 " + fmtPct(percentile(rel, 0.5)) +
		", p90 " + fmtPct(percentile(rel, 0.9)) + " over " + strconv.Itoa(len(rel)) + " requests."
}

// shortIDLen is how much of a session id the Requests page shows: enough
// to tell the sessions of one machine apart.
const shortIDLen = 8

// shortID is the start of a session id, with an ellipsis when cut.
func shortID(id string) string {
	if utf8.RuneCountInString(id) <= shortIDLen+1 {
		return id
	}
	return string([]rune(id)[:shortIDLen]) + "…"
}

// stateClass colours an engine's state: serving is good, dead is bad, the
// stages in between are neither.
func stateClass(state string) string {
	switch state {
	case "ready":
		return "good"
	case "restarting", "failed", "stopped":
		return "bad"
	}
	return ""
}

// gpuLabel names a card's GPUs: "NVIDIA GeForce RTX 4090", or "2× NVIDIA
// GeForce RTX 4090" for one engine over two.
func gpuLabel(e Engine) string {
	name := cmp.Or(e.GPU, "Unknown GPU")
	if e.GPUCount > 1 {
		return strconv.Itoa(e.GPUCount) + "× " + name
	}
	return name
}

// modelsVM lays out the models served on demand: each GPU's models, the
// resident ones first, and the latest Config.TransitionsShown transitions,
// newest first, each with a bar of its time against the longest shown.
func modelsVM(cfg Config, snap *snapshot) components.ModelsPanel {
	r := snap.residency
	p := components.ModelsPanel{Shown: len(r.Models) > 0 || len(r.Transitions) > 0 || snap.residencyErr != nil}
	if snap.residencyErr != nil {
		p.Err = "Cannot read the models: " + snap.residencyErr.Error()
	}
	byGPU := map[string]int{}
	for _, m := range r.Models {
		i, ok := byGPU[m.GPU]
		if !ok {
			i = len(p.GPUs)
			byGPU[m.GPU] = i
			p.GPUs = append(p.GPUs, components.ModelGPU{GPU: cmp.Or(m.GPU, "GPU"), DOMID: domID("models-", m.GPU)})
		}
		chip := modelChipVM(m)
		if m.State == ModelResident || m.State == ModelLoading {
			p.GPUs[i].Resident = append(p.GPUs[i].Resident, chip)
		} else {
			p.GPUs[i].Away = append(p.GPUs[i].Away, chip)
		}
	}
	ts := slices.Clone(r.Transitions)
	slices.SortStableFunc(ts, func(a, b ModelTransition) int { return b.At.Compare(a.At) })
	ts = ts[:min(len(ts), cfg.TransitionsShown)]
	var longest time.Duration
	for _, t := range ts {
		longest = max(longest, t.Took)
	}
	for _, t := range ts {
		w := 0.0
		if longest > 0 {
			w = max(100*t.Took.Seconds()/longest.Seconds(), 1)
		}
		p.Timeline = append(p.Timeline, components.TimelineRow{
			At: t.At.In(cfg.Location).Format("15:04:05"), GPU: t.GPU, Model: t.Model, Kind: t.Kind,
			Took: fmtLatency(t.Took), BarW: fmtSVG(w), Err: t.Err,
		})
	}
	return p
}

// modelChipVM is one model's name, state and what else there is to say.
func modelChipVM(m ResidentModel) components.ModelChip {
	chip := components.ModelChip{Name: m.Name, State: m.State}
	switch m.State {
	case ModelResident:
		chip.Class = "good"
	case ModelLoading, ModelUnloading:
		chip.Class = "warn"
	}
	var notes []string
	if m.InFlight > 0 {
		notes = append(notes, strconv.Itoa(m.InFlight)+" in flight")
	}
	if m.Pinned {
		notes = append(notes, "pinned")
	}
	if m.Share > 0 {
		notes = append(notes, fmtPct(m.Share)+" of the GPU")
	}
	chip.Note = strings.Join(notes, ", ")
	return chip
}
