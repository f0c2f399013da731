package console

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/console/components"
)

// overviewVM computes the overview page from a snapshot.
func overviewVM(cfg Config, snap *snapshot) components.OverviewVM {
	vm := components.OverviewVM{Totals: totalsVM(cfg, snap)}
	if snap.enginesErr != nil {
		vm.Err = "Cannot read the engines: " + snap.enginesErr.Error()
	}
	vm.GPUs = make([]components.GPUCard, 0, len(snap.engines))
	for _, e := range snap.engines {
		vm.GPUs = append(vm.GPUs, gpuCardVM(cfg, e, snap.workers[e.Worker]))
	}
	return vm
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
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
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
		DOMID:        domID("gpu-", e.Worker),
		Worker:       e.Worker,
		Node:         e.Node,
		GPU:          cmp.Or(e.GPU, "Unknown GPU"),
		Model:        e.Model,
		Image:        e.Image,
		Running:      e.Running,
		Waiting:      e.Waiting,
		TokensPerSec: noValue,
		KV:           kvBarVM(e),
		Chart:        hitChartVM(cfg, w.chart),
		State:        e.State,
		StateClass:   stateClass(e.State),
		LogTail:      e.LogTail,
		LoadPhase:    e.LoadPhase,
		LoadText:     e.LoadPhase,
		Diagnosis:    e.Diagnosis,
		Err:          e.Err,
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
	}
	if e.UtilizationPct >= 0 {
		c.Utilization = strconv.Itoa(e.UtilizationPct) + "%"
	}
	if e.TemperatureC >= 0 {
		c.Temperature = strconv.Itoa(e.TemperatureC) + " °C"
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

// hitChartVM turns chart points into polylines; a bucket without data
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
	var lines []string
	var b strings.Builder
	n := 0 // points in the current line
	step := float64(components.PlotRight-components.PlotLeft) / float64(max(len(points)-1, 1))
	height := float64(components.PlotBottom - components.PlotTop)
	flush := func(lastX, lastY float64) {
		if n == 1 {
			// A lone point would not draw; make it a short dash.
			b.WriteByte(' ')
			b.WriteString(fmtSVG(lastX + 3))
			b.WriteByte(',')
			b.WriteString(fmtSVG(lastY))
		}
		if n > 0 {
			lines = append(lines, b.String())
		}
		b.Reset()
		n = 0
	}
	var lastX, lastY float64
	for i, p := range points {
		v := value(p)
		if math.IsNaN(v) {
			flush(lastX, lastY)
			continue
		}
		v = min(max(v, 0), 1)
		x := float64(components.PlotLeft) + step*float64(i)
		y := float64(components.PlotBottom) - height*v
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fmtSVG(x))
		b.WriteByte(',')
		b.WriteString(fmtSVG(y))
		n++
		lastX, lastY = x, y
	}
	flush(lastX, lastY)
	return lines
}

// sessionsVM lists the most recently active sessions with their latest
// turns, marking turns whose cached share fell.
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
		Turns:     len(s.Turns),
		Worker:    cmp.Or(s.Worker, noValue),
		Idle:      fmtAgo(now.Sub(s.LastActive)),
		Context:   noValue,
		LastShare: noValue,
	}
	first := max(len(s.Turns)-cfg.TurnsShown, 0)
	row.HiddenTurns = first
	row.TurnRows = make([]components.TurnRow, 0, len(s.Turns)-first)
	prevShare := math.NaN()
	for i := range s.Turns {
		t := &s.Turns[i]
		share := math.NaN()
		if t.PromptTokens > 0 {
			share = float64(min(max(t.CachedTokens, 0), t.PromptTokens)) / float64(t.PromptTokens)
		}
		busted := i > 0 && (t.Diverged || (!math.IsNaN(prevShare) && !math.IsNaN(share) && share < prevShare-cfg.BustDrop))
		if busted {
			row.Busted++
		}
		if i == len(s.Turns)-1 {
			row.Context = fmtTokens(t.PromptTokens + t.OutputTokens)
			row.LastShare = fmtPct(share)
			row.LastLow = busted
		}
		prevShare = share
		if i < first {
			continue
		}
		row.TurnRows = append(row.TurnRows, turnRowVM(cfg, i+1, t, share, busted))
	}
	return row
}

func turnRowVM(cfg Config, n int, t *Turn, share float64, busted bool) components.TurnRow {
	cached := min(max(t.CachedTokens, 0), max(t.PromptTokens, 0))
	fresh := max(t.PromptTokens, 0) - cached
	r := components.TurnRow{
		N:      n,
		At:     t.At.In(cfg.Location).Format("15:04:05"),
		Prompt: fmtTokens(max(t.PromptTokens, 0)),
		Cached: fmtTokens(cached),
		New:    fmtTokens(fresh),
		Share:  fmtPct(share),
		Busted: busted,
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
		r.Diverged = "diverged at block " + strconv.Itoa(t.DivergedBlock)
	}
	return r
}

// requestsVM lists the latest routing decisions.
func requestsVM(cfg Config, snap *snapshot) components.RequestsVM {
	vm := components.RequestsVM{Queue: snap.queue}
	if snap.routerErr != nil {
		vm.Err = "Cannot read the router: " + snap.routerErr.Error()
	}
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
