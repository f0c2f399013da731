package daemon

import (
	"context"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/console"
)

// trafficSource reports the gateway's requests and sessions.
type trafficSource struct {
	traffic *api.Traffic
	decode  func([]uint32) string // token ids to text, for what a prompt changed
}

var _ console.TrafficSource = (*trafficSource)(nil)

func (s *trafficSource) RequestsSince(_ context.Context, since time.Time) ([]console.Request, error) {
	rs := s.traffic.RequestsSince(since)
	out := make([]console.Request, len(rs))
	for i, r := range rs {
		out[i] = console.Request{
			ID: r.ID, At: r.At, SessionID: r.SessionID, Client: r.Client, Worker: r.Worker, PromptTokens: r.PromptTokens,
			CachedTokens: r.CachedTokens, OutputTokens: r.OutputTokens, PredictedOutputTokens: r.PredictedOutputTokens,
			TTFT: r.TTFT, Hints: api.FormatHints(r.Hints, r.HintOrigins),
		}
	}
	return out, nil
}

func (s *trafficSource) Sessions(context.Context) ([]console.Session, error) {
	ss := s.traffic.Sessions()
	out := make([]console.Session, len(ss))
	for i, r := range ss {
		turns := make([]console.Turn, len(r.Turns))
		for j, t := range r.Turns {
			turns[j] = console.Turn{
				At: t.At, Kind: string(t.Kind), Worker: t.Worker,
				PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, OutputTokens: t.OutputTokens,
				Diverged: t.Diverged, DivergedBlock: t.DivergedBlock, Cause: t.Cause,
			}
			if s.decode != nil && (t.ChangedFrom != nil || t.ChangedTo != nil) {
				turns[j].ChangedFrom, turns[j].ChangedTo = s.decode(t.ChangedFrom), s.decode(t.ChangedTo)
			}
		}
		out[i] = console.Session{ID: r.ID, Client: r.Client, Worker: r.Worker, LastActive: r.LastActive, Turns: turns}
	}
	return out, nil
}
