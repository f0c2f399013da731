package api

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	retries     prometheus.Counter
	clientGone  prometheus.Counter
	speculative *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_gateway_requests_total",
			Help: "Requests answered by the gateway, by client dialect and HTTP status (499: the client went away).",
		}, []string{"dialect", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hearth_gateway_request_duration_seconds",
			Help:    "Time from routing to the end of the answer.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}, []string{"dialect"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hearth_gateway_time_to_first_token_seconds",
			Help:    "Time from sending a request to an engine to its first chunk.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"dialect"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hearth_gateway_worker_retries_total",
			Help: "Requests retried on another worker after one failed before answering.",
		}),
		clientGone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hearth_gateway_client_disconnects_total",
			Help: "Streams whose client went away; the engine request was cancelled.",
		}),
		speculative: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_gateway_speculative_prefills_total",
			Help: "Speculative prefills of the next turn, by outcome.",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.ttft, m.retries, m.clientGone, m.speculative} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

// observe counts a finished request; d is zero for requests that never
// reached a worker.
func (m *metrics) observe(dl dialect, status int, d time.Duration) {
	m.requests.WithLabelValues(dl.String(), strconv.Itoa(status)).Inc()
	if d > 0 {
		m.duration.WithLabelValues(dl.String()).Observe(d.Seconds())
	}
}
