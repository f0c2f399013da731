package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hearth-llm/hearth/catalog"
)

// ErrExited is returned by Ready when the engine exits before it serves.
var ErrExited = errors.New("engine exited before it was ready")

// readyPoll is how often a starting engine's HTTP API is asked whether it
// serves: often enough that a simulated engine is in service within a blink,
// rarely enough to cost nothing while a real one loads for minutes.
const readyPoll = 100 * time.Millisecond

// probeTimeout bounds one probe request: an engine that accepts the
// connection and then hangs is not ready.
const probeTimeout = 5 * time.Second

// probeClientTimeout bounds a whole exchange with an engine, reading the
// body included, for a caller that sets no deadline of its own; each probe
// sets a shorter one (probeTimeout, tokenizerCheckTimeout).
const probeClientTimeout = 30 * time.Second

// NewProbeClient returns the HTTP client that talks to engines outside
// the request path: readiness and liveness probes, /metrics scrapes,
// profile measurement, the tokenizer check, the console's engine figures.
// Every launcher, the supervisor and the daemon use this one.
//
// It never goes through a proxy from the environment: engines listen on
// this node (loopback ports, or a peer's forwarder on loopback), and the
// HTTPS_PROXY a machine sets for model downloads must not carry them;
// Go's environment proxy spares only "localhost" and loopback addresses,
// not the host's own names. It keeps at most two idle connections per
// engine, dials with a timeout and gives up on an exchange after
// probeClientTimeout, so that an engine that accepts and hangs holds no
// probe for ever.
func NewProbeClient() *http.Client {
	return &http.Client{
		Timeout: probeClientTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: probeTimeout}).DialContext,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// WaitReady polls an engine's HTTP API until /health answers 200 and
// /v1/models lists model. It returns ErrExited as soon as exited is closed,
// and ctx's error when ctx ends first; the last probe error is wrapped so
// that a timeout says what was seen.
func WaitReady(ctx context.Context, client *http.Client, baseURL, model string, exited <-chan struct{}) error {
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	var last error
	for {
		if last = probe(ctx, client, baseURL, model); last == nil {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, client *http.Client, baseURL, model string) error {
	if err := getJSON(ctx, client, baseURL+"/health", nil); err != nil {
		return err
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, client, baseURL+"/v1/models", &models); err != nil {
		return err
	}
	for _, m := range models.Data {
		if m.ID == model {
			return nil
		}
	}
	return fmt.Errorf("/v1/models does not list %q yet", model)
}

// getJSON GETs url and decodes a 200 answer's JSON body into v (nil: the
// body is ignored).
func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// MeasureProfile asks a serving engine how much KV it holds and returns the
// estimate with what the engine told (its kind's MeasureProfile: vLLM and
// the simulated engine report it in vllm:cache_config_info, SGLang in
// /server_info); an engine that tells nothing keeps the estimate, with
// Measured false.
func MeasureProfile(ctx context.Context, client *http.Client, baseURL string, kind Kind, estimate catalog.Profile) catalog.Profile {
	p := estimate
	p.Measured = false
	k, ok := Lookup(kind)
	if !ok {
		return p
	}
	if measured, ok := k.MeasureProfile(ctx, client, baseURL, p); ok {
		measured.Measured = true
		return measured
	}
	return p
}

// Stats is what an engine's /metrics says of its load and cache, in vLLM's
// terms whatever the engine.
type Stats struct {
	Running, Waiting int
	// KVUsage is the fraction of KV blocks held by running requests.
	KVUsage float64
	// Cumulative counters (they restart with the engine).
	PrefixQueries, PrefixHits int64 // prompt tokens looked up, and found
	GenerationTokens          int64
	// The tiers below the GPU, where the engine tells: prompt tokens
	// loaded from host RAM and from the node's SSD store instead of
	// recomputed (SGLang's cached_tokens_total by source; vLLM's external
	// prefix-cache hits, its host-RAM connector), what the host-RAM tier
	// holds (RAMBlocks, -1 when untold), and the blocks moved between the
	// GPU and the tiers (the simulated engines' hearth_sim_kv_tier_*).
	RAMHitTokens, StoreHitTokens int64
	RAMBlocks                    int
	LoadedBlocks, StoredBlocks   int64
}

// ScrapeStats reads an engine's /metrics by the metric names of whichever
// registered kind's it finds.
func ScrapeStats(ctx context.Context, client *http.Client, baseURL string) (Stats, error) {
	families, err := scrape(ctx, client, baseURL)
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	found := false
	for _, k := range Kinds() {
		if s, found = k.Stats(families); found {
			break
		}
	}
	if !found {
		return Stats{}, fmt.Errorf("metrics: no engine's names (known: %s)", KindNames())
	}
	s.RAMBlocks = -1
	if f := families["hearth_sim_kv_tier_blocks"]; f != nil {
		s.RAMBlocks = int(sumTier(f, "ram"))
		loaded, stored := families["hearth_sim_kv_tier_loaded_blocks_total"], families["hearth_sim_kv_tier_stored_blocks_total"]
		s.LoadedBlocks, s.StoredBlocks = int64(sum(loaded)), int64(sum(stored))
		if s.StoreHitTokens == 0 {
			// A simulated vLLM engine's external hits count both tiers:
			// split them by the blocks each tier loaded.
			ram, ssd := sumTier(loaded, "ram"), sumTier(loaded, "ssd")
			if ram+ssd > 0 {
				s.StoreHitTokens = int64(float64(s.RAMHitTokens) * ssd / (ram + ssd))
				s.RAMHitTokens -= s.StoreHitTokens
			}
		}
	}
	return s, nil
}

// sumTier sums the samples of a family whose tier label is tier.
func sumTier(f *dto.MetricFamily, tier string) float64 {
	var total float64
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "tier" && l.GetValue() == tier {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return total
}

// hitsFrom sums SGLang's cached prompt tokens whose cache_source passes
// keep. A sample without the label is the device's: releases before the
// host and storage tiers were told apart had only it.
func hitsFrom(f *dto.MetricFamily, keep func(source string) bool) float64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		source := "device"
		for _, l := range m.GetLabel() {
			if l.GetName() == "cache_source" {
				source = l.GetValue()
			}
		}
		if keep(source) {
			total += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return total
}

// isDevice keeps the tokens found on the GPU: vLLM's prefix-cache counter
// leaves out what its KV connector loads, and so does Hearth.
func isDevice(source string) bool { return source == "device" }

// scrape GETs baseURL/metrics and parses the Prometheus text format.
func scrape(ctx context.Context, client *http.Client, baseURL string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return families, nil
}

// sum adds a family's samples over their labels (vLLM labels each series
// with its engine index; data-parallel engines have several).
func sum(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// firstLabels returns the labels of a family's first sample.
func firstLabels(f *dto.MetricFamily) map[string]string {
	out := map[string]string{}
	if f == nil || len(f.GetMetric()) == 0 {
		return out
	}
	for _, l := range f.GetMetric()[0].GetLabel() {
		out[strings.ToLower(l.GetName())] = l.GetValue()
	}
	return out
}
