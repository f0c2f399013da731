package bench

import (
	"context"
	"errors"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// Percentile returns the p-th percentile (0 <= p <= 100, clamped) of
// sorted, which must be in ascending order, by linear interpolation between
// the closest ranks: with n values and 0-based rank h = (n-1)·p/100, the
// result is sorted[⌊h⌋] + (h-⌊h⌋)·(sorted[⌊h⌋+1] - sorted[⌊h⌋]). This is
// Hyndman and Fan's definition 7, the default of NumPy and of spreadsheets'
// PERCENTILE.INC: p50 of an even count is the mean of the middle two, p0 is
// the minimum and p100 the maximum. It returns 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if !(p > 0) { // also NaN
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	h := float64(n-1) * p / 100
	lo := int(h)
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Latency summarises a set of latencies, in milliseconds: percentiles as
// Percentile defines them and the arithmetic mean. All zero for no values.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

// SummarizeMillis summarises values given in milliseconds; it sorts them in
// place.
func SummarizeMillis(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	slices.Sort(ms)
	var sum float64
	for _, v := range ms {
		sum += v
	}
	return Latency{
		P50:  Percentile(ms, 50),
		P90:  Percentile(ms, 90),
		P99:  Percentile(ms, 99),
		Mean: sum / float64(len(ms)),
	}
}

// SummarizeDurations summarises durations, in milliseconds.
func SummarizeDurations(ds []time.Duration) Latency {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = millis(d)
	}
	return SummarizeMillis(ms)
}

func millis(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// Result is what a runner measured for one request. Times are on the
// runner's clock, since the start of the run.
type Result struct {
	Session string
	Turn    int
	// Last says the request was its session's last turn (Request.Last).
	Last bool
	// Compaction says the request was a summarisation turn
	// (Request.Compaction).
	Compaction bool
	// Side says the request was a side request (Request.Side).
	Side bool
	// Sent is when the request left the client; FirstToken when its first
	// output token arrived; Done when its last one did (or it failed).
	Sent, FirstToken, Done time.Duration
	// PromptTokens is the prompt's length as the engine counted it.
	PromptTokens int
	// OutputTokens is how many tokens arrived.
	OutputTokens int
	// PredictedCachedTokens is the router's prediction of the prompt tokens
	// already cached on the worker it chose: its GPU overlap blocks plus the
	// blocks its lower tiers hold after them, × block size.
	// PredictedRAMTokens and PredictedSSDTokens are the parts of it in the
	// worker's host RAM and on its node's SSD; the rest is on its GPU.
	PredictedCachedTokens                  int
	PredictedRAMTokens, PredictedSSDTokens int
	// CachedTokens is how many prompt tokens the engine did not compute:
	// GPU prefix-cache hits plus blocks loaded from its host-RAM tier, as
	// vLLM's num_cached_tokens (usage.prompt_tokens_details) counts them.
	CachedTokens int
	// RAMCachedTokens and SSDCachedTokens are the parts of CachedTokens
	// loaded from the engine's host-RAM tier and from the node's SSD store
	// (a simulation tells them apart; a live target does not).
	RAMCachedTokens, SSDCachedTokens int
	// PauseContextTokens is, for a turn after a tool pause, the length of
	// its prompt before the tool result: the previous prompt and answer,
	// what the session's worker could hold when the turn comes. Zero for
	// any other request, and in live runs (their prompts are rendered).
	PauseContextTokens int
	// PredictedOutputTokens is the output length the runner's estimator
	// (or the gateway's, x-hearth-osl) expected; 0 without an estimate.
	// PredictionWarm says it was made after the session's first
	// osl.WarmTurns turns.
	PredictedOutputTokens int
	PredictionWarm        bool
	// Err is why the request failed; nil if it succeeded.
	Err error
}

// RunSummary is the outcome of one run: one policy at one concurrency
// level. Its fields are exactly the objects of "runs" in the JSON report.
//
//   - Requests counts every request that ended, Errors those that failed;
//     everything else is over the successful ones.
//   - TTFT is FirstToken - Sent; E2E is Done - Sent; ITL is a request's mean
//     gap between output tokens, (Done - FirstToken) / (OutputTokens - 1),
//     over requests with at least two output tokens.
//   - OutputTokS is all output tokens divided by the run's span, from the
//     first request sent to the last one done.
//   - PredictedHitRate and EngineHitRate are token-weighted: predicted or
//     engine-cached prompt tokens over all prompt tokens, every tier
//     counted in both. PredictedRAMHitRate and PredictedSSDHitRate are the
//     parts of PredictedHitRate predicted in host RAM and on the node's
//     SSD; the rest was predicted on the GPU.
//   - PrefillTokens are prompt tokens the engines computed, CachedTokens
//     those they served from cache; together they are all prompt tokens.
//     RAMCachedTokens and SSDCachedTokens are the cached tokens loaded from
//     the tiers below the GPU (simulations only).
//   - ErrorsByCause splits Errors by why the requests failed.
//   - Compactions counts the summarisation turns that succeeded: the
//     sessions compacted their history that often instead of failing on
//     the context; CompactionsPerSession divides them by StartedSessions.
//   - Session and SlowestTurnTTFT are over the sessions that finished: every
//     request of the session (its subagents' included) succeeded and its
//     last turn ended. StartedSessions counts the sessions that sent a
//     request; those that did not finish were cut by the workload's end or
//     failed, and a policy that stalls sessions finishes fewer of them,
//     whatever its per-request TTFT says. Session is the task time, from the session's first
//     request sent to the last token of its last turn, tool pauses
//     included; SlowestTurnTTFT is the longest TTFT among its requests.
//     Sessions counts them. A trace request is a session of its own.
//   - Seed is the seed of the run's workload, engines and router.
type RunSummary struct {
	Policy                string      `json:"policy"`
	Sessions              int         `json:"sessions"`
	Seed                  uint64      `json:"seed"`
	Requests              int         `json:"requests"`
	Errors                int         `json:"errors"`
	ErrorsByCause         ErrorCauses `json:"errors_by_cause"`
	Compactions           int         `json:"compactions"`
	CompactionsPerSession float64     `json:"compactions_per_session"`
	StartedSessions       int         `json:"started_sessions"`
	FinishedSessions      int         `json:"finished_sessions"`
	Session               Latency     `json:"session_ms"`
	SlowestTurnTTFT       Latency     `json:"slowest_turn_ttft_ms"`
	TTFT                  Latency     `json:"ttft_ms"`
	// TurnTTFT and SideTTFT split TTFT between the sessions' own
	// requests and their side requests; SideTTFT is zero without any.
	TurnTTFT         Latency `json:"turn_ttft_ms"`
	SideTTFT         Latency `json:"side_ttft_ms"`
	ITL              Latency `json:"itl_ms"`
	E2E              Latency `json:"e2e_ms"`
	OutputTokS       float64 `json:"output_tok_s"`
	PredictedHitRate float64 `json:"predicted_hit_rate"`
	// The split of PredictedHitRate; omitted when nothing was predicted
	// below the GPU.
	PredictedRAMHitRate float64 `json:"predicted_ram_hit_rate,omitempty"`
	PredictedSSDHitRate float64 `json:"predicted_ssd_hit_rate,omitempty"`
	EngineHitRate       float64 `json:"engine_hit_rate"`
	PrefillTokens       int64   `json:"prefill_tokens"`
	CachedTokens        int64   `json:"cached_tokens"`
	RAMCachedTokens     int64   `json:"ram_cached_tokens,omitempty"`
	SSDCachedTokens     int64   `json:"ssd_cached_tokens,omitempty"`
	// PauseCachedShare is the share of the turns' prompts before the tool
	// result that the engines found cached, over the turns after a tool
	// pause (Result.PauseContextTokens); zero without any.
	PauseCachedShare float64 `json:"pause_cached_share,omitempty"`
	// ToolPausePrefill counts the simulated gateway's prefills in the tool
	// pause (SimConfig.InferHints); nil where none was sent.
	ToolPausePrefill *PrefillCounts `json:"tool_pause_prefill,omitempty"`
	// OutputLength is the error of the output-length estimates; nil when
	// the run made none.
	OutputLength *OutputLengthError `json:"output_length_error,omitempty"`
}

// PrefillCounts are the prefills in the tool pause of a simulated run:
// Sent were started on an engine, Completed computed their prompt,
// Cancelled were aborted by their session's next turn and TimedOut by the
// gateway's bound on them (api.Config.SpeculativeTimeout); the rest were
// still running when the run ended.
type PrefillCounts struct {
	Sent      int `json:"sent"`
	Completed int `json:"completed"`
	Cancelled int `json:"cancelled"`
	TimedOut  int `json:"timed_out"`
}

// Summarize computes the summary of a run of policy at a concurrency level
// of sessions (0 for a trace) from its results.
func Summarize(policy string, sessions int, results []Result) RunSummary {
	s := RunSummary{Policy: policy, Sessions: sessions, Requests: len(results)}
	var ttft, turnTTFT, sideTTFT, itl, e2e []float64
	var prompt, predicted, predictedRAM, predictedSSD, cached, output int64
	var pauseContext, pauseCached int64
	first, last := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for i := range results {
		r := &results[i]
		first, last = min(first, r.Sent), max(last, r.Done)
		if r.Compaction && r.Err == nil {
			s.Compactions++
		}
		if r.Err != nil {
			s.Errors++
			s.ErrorsByCause.add(r.Err)
			continue
		}
		ttft = append(ttft, millis(r.FirstToken-r.Sent))
		if r.Side {
			sideTTFT = append(sideTTFT, millis(r.FirstToken-r.Sent))
		} else {
			turnTTFT = append(turnTTFT, millis(r.FirstToken-r.Sent))
		}
		e2e = append(e2e, millis(r.Done-r.Sent))
		if r.OutputTokens >= 2 {
			itl = append(itl, millis(r.Done-r.FirstToken)/float64(r.OutputTokens-1))
		}
		prompt += int64(r.PromptTokens)
		predicted += int64(r.PredictedCachedTokens)
		predictedRAM += int64(r.PredictedRAMTokens)
		predictedSSD += int64(r.PredictedSSDTokens)
		cached += int64(r.CachedTokens)
		s.RAMCachedTokens += int64(r.RAMCachedTokens)
		s.SSDCachedTokens += int64(r.SSDCachedTokens)
		output += int64(r.OutputTokens)
		if r.PauseContextTokens > 0 && !r.Side {
			pauseContext += int64(r.PauseContextTokens)
			pauseCached += int64(min(r.CachedTokens, r.PauseContextTokens))
		}
	}
	if pauseContext > 0 {
		s.PauseCachedShare = float64(pauseCached) / float64(pauseContext)
	}
	s.TTFT, s.ITL, s.E2E = SummarizeMillis(ttft), SummarizeMillis(itl), SummarizeMillis(e2e)
	s.TurnTTFT, s.SideTTFT = SummarizeMillis(turnTTFT), SummarizeMillis(sideTTFT)
	if span := last - first; len(results) > 0 && span > 0 {
		s.OutputTokS = float64(output) / span.Seconds()
	}
	if prompt > 0 {
		s.PredictedHitRate = float64(predicted) / float64(prompt)
		s.PredictedRAMHitRate = float64(predictedRAM) / float64(prompt)
		s.PredictedSSDHitRate = float64(predictedSSD) / float64(prompt)
		s.EngineHitRate = float64(cached) / float64(prompt)
	}
	s.PrefillTokens, s.CachedTokens = prompt-cached, cached
	s.Session, s.SlowestTurnTTFT, s.FinishedSessions, s.StartedSessions = summarizeSessions(results)
	s.OutputLength = summarizeOutputLength(results)
	if s.StartedSessions > 0 {
		s.CompactionsPerSession = float64(s.Compactions) / float64(s.StartedSessions)
	}
	return s
}

// sessionSpan is what one session measured so far.
type sessionSpan struct {
	start, end  time.Duration
	slowestTTFT time.Duration
	failed      bool
	lastDone    bool
}

// summarizeSessions measures the finished sessions of results (see
// RunSummary): task time and slowest turn TTFT of each, how many finished
// and how many started.
func summarizeSessions(results []Result) (task, slowest Latency, finished, started int) {
	spans := make(map[string]*sessionSpan)
	var order []string
	for i := range results {
		r := &results[i]
		id := topSession(r.Session)
		sp := spans[id]
		if sp == nil {
			sp = &sessionSpan{start: r.Sent, end: r.Done}
			spans[id] = sp
			order = append(order, id)
		}
		sp.start, sp.end = min(sp.start, r.Sent), max(sp.end, r.Done)
		if r.Err != nil {
			sp.failed = true
			continue
		}
		sp.slowestTTFT = max(sp.slowestTTFT, r.FirstToken-r.Sent)
		if r.Last && r.Session == id {
			sp.lastDone = true
		}
	}
	var taskMS, slowMS []float64
	for _, id := range order {
		sp := spans[id]
		if sp.failed || !sp.lastDone {
			continue
		}
		taskMS = append(taskMS, millis(sp.end-sp.start))
		slowMS = append(slowMS, millis(sp.slowestTTFT))
	}
	return SummarizeMillis(taskMS), SummarizeMillis(slowMS), len(taskMS), len(order)
}

// topSession returns the session a request belongs to: a subagent's
// requests ("s00012.1") count towards their parent ("s00012").
func topSession(id string) string {
	if i := strings.IndexByte(id, '.'); i >= 0 {
		return id[:i]
	}
	return id
}

// ErrorCauses counts failed requests by why they failed:
//
//   - ContextLength: the prompt plus max_tokens did not fit the engine's
//     max_model_len (vLLM's 400), counted apart because no routing can
//     help it;
//   - QueueFull: the router's queue was full (a gateway's 429);
//   - Engine: the engine refused or broke the request otherwise (a 5xx);
//   - Timeout: the request or its connection timed out;
//   - Other: anything else.
type ErrorCauses struct {
	ContextLength int `json:"context_length"`
	QueueFull     int `json:"queue_full"`
	Engine        int `json:"engine"`
	Timeout       int `json:"timeout"`
	Other         int `json:"other"`
}

// errEngine marks a request an engine refused or failed; errContextLength
// a live server's refusal of a request over its context (a 400 in vLLM's
// or OpenAI's words).
var (
	errEngine        = errors.New("engine error")
	errContextLength = errors.New("context length exceeded")
)

// add counts err under its cause.
func (c *ErrorCauses) add(err error) {
	var netErr net.Error
	switch {
	case errors.Is(err, sim.ErrPromptTooLong), errors.Is(err, errContextLength):
		c.ContextLength++
	case errors.Is(err, router.ErrQueueFull):
		c.QueueFull++
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		c.Timeout++
	case errors.Is(err, errEngine):
		c.Engine++
	default:
		c.Other++
	}
}

// String lists the non-zero causes, "ctx 3, queue 1", or "-" for none.
func (c ErrorCauses) String() string {
	var parts []string
	for _, p := range []struct {
		name string
		n    int
	}{{"ctx", c.ContextLength}, {"queue", c.QueueFull}, {"engine", c.Engine}, {"timeout", c.Timeout}, {"other", c.Other}} {
		if p.n > 0 {
			parts = append(parts, p.name+" "+strconv.Itoa(p.n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// Recorder collects the results of a run as they come in. It is safe for
// concurrent use.
type Recorder struct {
	mu      sync.Mutex
	results []Result
	errors  int
	ttftMS  []float64
	scratch []float64
}

// Add records one result.
func (rec *Recorder) Add(r Result) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.results = append(rec.results, r)
	if r.Err != nil {
		rec.errors++
	} else {
		rec.ttftMS = append(rec.ttftMS, millis(r.FirstToken-r.Sent))
	}
}

// Counts returns how many requests have ended and how many of them failed.
func (rec *Recorder) Counts() (requests, errors int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.results), rec.errors
}

// TTFTP50 returns the median time to first token of the successful
// requests so far, for a progress display.
func (rec *Recorder) TTFTP50() time.Duration {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.scratch = append(rec.scratch[:0], rec.ttftMS...)
	slices.Sort(rec.scratch)
	return time.Duration(Percentile(rec.scratch, 50) * float64(time.Millisecond))
}

// Results returns a copy of the results so far, in the order they were
// added.
func (rec *Recorder) Results() []Result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.results)
}

// Summary summarises the results so far (see Summarize).
func (rec *Recorder) Summary(policy string, sessions int) RunSummary {
	return Summarize(policy, sessions, rec.Results())
}
