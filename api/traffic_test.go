package api

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

func hashes(hs ...tokenizer.SeqHash) []tokenizer.SeqHash { return hs }

func TestCompareTurns(t *testing.T) {
	const b = 16
	for _, tc := range []struct {
		name       string
		prev, cur  []tokenizer.SeqHash
		prevWorker string
		worker     string
		cached     int
		reported   bool
		shared     int
		diverged   bool
		block      int
		cause      string
	}{
		{"extends, served from cache", hashes(1, 2), hashes(1, 2, 3, 4), "w1", "w1", 2 * b, true, 2, false, 0, ""},
		{"repeats; the last token is recomputed", hashes(1, 2, 3), hashes(1, 2, 3), "w1", "w1", 3*b - 1, true, 3, false, 0, ""},
		{"a shorter prefix is no change", hashes(1, 2, 3), hashes(1, 2), "w1", "w1", 2 * b, true, 2, false, 0, ""},
		{"previous had no full block", nil, hashes(1), "w1", "w1", 0, true, 0, false, 0, ""},
		{"cached more than shared (another session's prefix)", hashes(1), hashes(1, 2, 3), "w1", "w1", 3 * b, true, 1, false, 0, ""},
		{"evicted on the same worker", hashes(1, 2, 3), hashes(1, 2, 3, 4), "w1", "w1", b, true, 3, true, 1, CauseEvicted},
		{"routed elsewhere", hashes(1, 2, 3), hashes(1, 2, 3, 4), "w1", "w2", 0, true, 3, true, 0, CauseRoutedElsewhere},
		{"another worker that had it is fine", hashes(1, 2, 3), hashes(1, 2, 3, 4), "w1", "w2", 3 * b, true, 3, false, 0, ""},
		{"no cache report: loss is not judged", hashes(1, 2, 3), hashes(1, 2, 3, 4), "w1", "w1", 0, false, 3, false, 0, ""},
		{"first block changed", hashes(1, 2, 3), hashes(9, 2, 3, 4), "w1", "w1", 0, true, 0, true, 0, CausePromptChanged},
		{"middle block changed", hashes(1, 2, 3), hashes(1, 2, 7, 8), "w1", "w1", 2 * b, true, 2, true, 2, CausePromptChanged},
		{"changed, unreported cache", hashes(1, 2, 3), hashes(1, 7), "w1", "w1", 0, false, 1, true, 1, CausePromptChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turn := TurnRecord{Kind: KindTurn, Worker: tc.worker, CachedTokens: tc.cached}
			compareTurns(&turn, tc.prev, tc.prevWorker, tc.cur, tc.reported, b)
			if turn.SharedBlocks != tc.shared || turn.Diverged != tc.diverged || turn.DivergedBlock != tc.block || turn.Cause != tc.cause {
				t.Fatalf("shared %d diverged %v at %d cause %q; want shared %d diverged %v at %d cause %q",
					turn.SharedBlocks, turn.Diverged, turn.DivergedBlock, turn.Cause, tc.shared, tc.diverged, tc.block, tc.cause)
			}
		})
	}
}

// TestTrafficSideRequests: a side request between two turns is listed in
// order of arrival but compared with nothing, and the turn after it is
// compared with the turn before it.
func TestTrafficSideRequests(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tr := NewTraffic(TrafficLimits{})
	rec := func(id string, kind RequestKind, sec int, finish int, hs []tokenizer.SeqHash, prompt, cached int) {
		at := t0.Add(time.Duration(sec) * time.Second)
		tr.Record(RequestRecord{ID: id, At: at, SessionID: "s", Client: "claude-code", Kind: kind, Worker: "w1",
			PromptTokens: prompt, CachedTokens: cached, CacheReported: true}, nil, hs, t0.Add(time.Duration(finish)*time.Second))
	}
	// The side request arrives first and finishes last.
	rec("side", KindSide, 0, 9, hashes(50, 51), 40, 0)
	rec("t1", KindTurn, 1, 2, hashes(1, 2, 3), 50, 0)
	rec("t2", KindTurn, 3, 4, hashes(1, 2, 3, 4, 5), 80, 48)
	rec("probe", KindSide, 5, 6, hashes(60), 20, 0)
	rec("t3", KindTurn, 7, 8, hashes(1, 2, 3, 4, 5, 6), 96, 80)
	s := tr.Sessions()[0]
	var got []string
	for _, turn := range s.Turns {
		got = append(got, fmt.Sprintf("%s/%d/%v/%d", turn.Kind, turn.PromptTokens, turn.Diverged, turn.SharedBlocks))
	}
	want := "[side/40/false/0 turn/50/false/0 turn/80/false/3 side/20/false/0 turn/96/false/5]"
	if fmt.Sprint(got) != want {
		t.Fatalf("turns %v, want %v", got, want)
	}
}

func TestTrafficSessions(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type req struct {
		id, session, worker string
		hashes              []tokenizer.SeqHash
		prompt, cached      int
	}
	type turn struct {
		prompt, cached int
		diverged       bool
		block          int
	}
	for _, tc := range []struct {
		name     string
		limits   TrafficLimits
		reqs     []req
		sessions map[string][]turn // expected turns per kept session
		workers  map[string]string // expected last worker per session
	}{
		{
			name: "an agent loop extends its prompt",
			reqs: []req{
				{"r1", "s", "w1", hashes(1, 2), 40, 0},
				{"r2", "s", "w1", hashes(1, 2, 3, 4), 70, 32},
				{"r3", "s", "w2", hashes(1, 2, 3, 4, 5), 90, 64},
			},
			sessions: map[string][]turn{"s": {{40, 0, false, 0}, {70, 32, false, 0}, {90, 64, false, 0}}},
			workers:  map[string]string{"s": "w2"},
		},
		{
			name: "a rewritten system prompt diverges at block 0",
			reqs: []req{
				{"r1", "s", "w1", hashes(1, 2, 3), 50, 0},
				{"r2", "s", "w1", hashes(7, 8, 9, 10), 66, 0},
			},
			sessions: map[string][]turn{"s": {{50, 0, false, 0}, {66, 0, true, 0}}},
			workers:  map[string]string{"s": "w1"},
		},
		{
			name: "requests without a session are no session",
			reqs: []req{
				{"r1", "", "w1", hashes(1), 20, 0},
				{"r2", "a", "w2", hashes(1), 20, 16},
			},
			sessions: map[string][]turn{"a": {{20, 16, false, 0}}},
			workers:  map[string]string{"a": "w2"},
		},
		{
			name:   "sessions are bounded: the idlest goes",
			limits: TrafficLimits{Sessions: 2},
			reqs: []req{
				{"r1", "a", "w1", hashes(1), 20, 0},
				{"r2", "b", "w1", hashes(2), 20, 0},
				{"r3", "a", "w1", hashes(1, 3), 40, 16},
				{"r4", "c", "w2", hashes(4), 20, 0},
			},
			sessions: map[string][]turn{"a": {{20, 0, false, 0}, {40, 16, false, 0}}, "c": {{20, 0, false, 0}}},
			workers:  map[string]string{"a": "w1", "c": "w2"},
		},
		{
			name:   "turns are bounded: the oldest go",
			limits: TrafficLimits{Turns: 2},
			reqs: []req{
				{"r1", "s", "w1", hashes(1), 10, 0},
				{"r2", "s", "w1", hashes(1, 2), 20, 16},
				{"r3", "s", "w1", hashes(5), 30, 0},
			},
			sessions: map[string][]turn{"s": {{20, 16, false, 0}, {30, 0, true, 0}}},
			workers:  map[string]string{"s": "w1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTraffic(tc.limits)
			for i, r := range tc.reqs {
				at := t0.Add(time.Duration(i) * time.Second)
				tr.Record(RequestRecord{ID: r.id, At: at, SessionID: r.session, Client: "opencode", Worker: r.worker,
					PromptTokens: r.prompt, CachedTokens: r.cached, OutputTokens: 5}, nil, r.hashes, at.Add(time.Second/2))
			}
			got := tr.Sessions()
			if len(got) != len(tc.sessions) {
				t.Fatalf("got %d sessions %+v, want %d", len(got), got, len(tc.sessions))
			}
			for i, s := range got {
				if i > 0 && s.LastActive.After(got[i-1].LastActive) {
					t.Errorf("sessions not most recently active first: %v after %v", s.LastActive, got[i-1].LastActive)
				}
				want, ok := tc.sessions[s.ID]
				if !ok {
					t.Errorf("unexpected session %q", s.ID)
					continue
				}
				if s.Worker != tc.workers[s.ID] || s.Client != "opencode" {
					t.Errorf("session %s: worker %q client %q, want worker %q", s.ID, s.Worker, s.Client, tc.workers[s.ID])
				}
				if len(s.Turns) != len(want) {
					t.Fatalf("session %s: %d turns, want %d", s.ID, len(s.Turns), len(want))
				}
				for j, w := range want {
					g := s.Turns[j]
					if g.PromptTokens != w.prompt || g.CachedTokens != w.cached || g.Diverged != w.diverged || g.DivergedBlock != w.block || g.OutputTokens != 5 {
						t.Errorf("session %s turn %d: %+v, want %+v", s.ID, j, g, w)
					}
				}
			}
		})
	}
}

func TestTrafficRequestsSinceIsBounded(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tr := NewTraffic(TrafficLimits{Requests: 3})
	for i := range 5 {
		tr.Record(RequestRecord{ID: fmt.Sprint(i), At: t0.Add(time.Duration(i) * time.Second)}, nil, nil, t0)
	}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  []string
	}{
		{"all kept", t0, []string{"2", "3", "4"}},
		{"at or after", t0.Add(3 * time.Second), []string{"3", "4"}},
		{"none", t0.Add(time.Minute), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range tr.RequestsSince(tc.since) {
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrafficReturnsCopies(t *testing.T) {
	tr := NewTraffic(TrafficLimits{})
	h := hashes(1, 2)
	tr.Record(RequestRecord{ID: "r1", SessionID: "s"}, nil, h, time.Now())
	h[0] = 99 // the caller reuses its slice
	tr.Sessions()[0].Turns[0].PromptTokens = 1234
	tr.Record(RequestRecord{ID: "r2", SessionID: "s"}, nil, hashes(1, 2, 3), time.Now())
	s := tr.Sessions()[0]
	if s.Turns[0].PromptTokens != 0 {
		t.Errorf("a returned session aliased the record")
	}
	if s.Turns[1].Diverged {
		t.Errorf("the record kept the caller's hash slice instead of a copy")
	}
}

func TestTrafficConcurrentUse(t *testing.T) {
	tr := NewTraffic(TrafficLimits{Requests: 16, Sessions: 4, Turns: 4})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				tr.Record(RequestRecord{ID: fmt.Sprint(g, i), SessionID: fmt.Sprint(i % 6), At: time.Now()}, nil, hashes(tokenizer.SeqHash(i)), time.Now())
				tr.Sessions()
				tr.RequestsSince(time.Time{})
			}
		})
	}
	wg.Wait()
	if n := len(tr.RequestsSince(time.Time{})); n != 16 {
		t.Errorf("kept %d requests, want 16", n)
	}
	if n := len(tr.Sessions()); n > 4 {
		t.Errorf("kept %d sessions, want at most 4", n)
	}
}

func TestClientKind(t *testing.T) {
	for _, tc := range []struct {
		name, ua   string
		claude     bool
		originator string
		want       string
	}{
		{"claude code", "claude-cli/2.1.197 (external, sdk-cli)", true, "", "claude-code"},
		{"claude code by user agent", "claude-cli/2.1.197", false, "", "claude-code"},
		{"codex", "codex_exec/0.171.0 (Debian 12.0.0; x86_64)", false, "codex_exec", "codex"},
		{"codex by originator", "", false, "codex_cli_rs", "codex"},
		{"opencode", "opencode/1.18.33 ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.14", false, "", "opencode"},
		{"another client", "Go-http-client/1.1", false, "", "Go-http-client"},
		{"no user agent", "", false, "", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientFromHeaders(tc.ua, tc.claude, tc.originator); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGatewayRecordsTraffic: a finished request is in the record with the
// engine's usage, its worker and its client; the next turn of the session
// extends it.
func TestGatewayRecordsTraffic(t *testing.T) {
	h := startGateway(t, nil)
	h.engine.cachedTokens = 7
	turn1 := `{"model":"gpt-x","stream":true,"messages":[{"role":"system","content":"` + longText(8) + `"},{"role":"user","content":"hi"}]}`
	turn2 := `{"model":"gpt-x","stream":true,"messages":[{"role":"system","content":"` + longText(8) + `"},{"role":"user","content":"hi"},{"role":"assistant","content":"Hello from the engine."},{"role":"user","content":"more"}]}`
	for _, body := range []string{turn1, turn2} {
		resp, out := h.post(t, "/v1/chat/completions", body, "x-session-affinity", "ses_1", "User-Agent", "opencode/1.0")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	h.router.waitFreed(t, 2) // the record is written before the router hears Free
	sessions := h.gw.Traffic().Sessions()
	if len(sessions) != 1 || len(sessions[0].Turns) != 2 {
		t.Fatalf("sessions: %+v", sessions)
	}
	s := sessions[0]
	if s.ID != "ses_1" || s.Client != "opencode" || s.Worker != "w1" {
		t.Errorf("session %+v", s)
	}
	if s.Turns[1].Diverged {
		t.Errorf("turn 2 extends turn 1 but is marked diverged at block %d", s.Turns[1].DivergedBlock)
	}
	reqs := h.gw.Traffic().RequestsSince(time.Time{})
	if len(reqs) != 2 {
		t.Fatalf("requests: %+v", reqs)
	}
	for _, r := range reqs {
		if r.CachedTokens != 7 || r.PromptTokens == 0 || r.OutputTokens == 0 || r.TTFT <= 0 || r.Status != http.StatusOK {
			t.Errorf("request %+v: want the engine's usage, a TTFT and status 200", r)
		}
	}
}

// TestTrafficShowsWhatAPromptChanged: a turn whose client rewrote its
// prompt inside the previous turn keeps the tokens around the first
// differing block, before and after, to show what changed.
func TestTrafficShowsWhatAPromptChanged(t *testing.T) {
	prev := make([]uint32, 64)
	for i := range prev {
		prev[i] = uint32(1000 + i)
	}
	cur := append(slices.Clone(prev), 7, 8, 9)
	cur[40] = 5 // block 2 of 16-token blocks
	tr := NewTraffic(TrafficLimits{})
	t0 := time.Now()
	for i, ids := range [][]uint32{prev, cur} {
		at := t0.Add(time.Duration(i) * time.Second)
		tr.Record(RequestRecord{ID: fmt.Sprint(i), At: at, SessionID: "s", Kind: KindTurn, Worker: "w1",
			PromptTokens: len(ids), CachedTokens: 32, CacheReported: true}, ids, tokenizer.BlockHashes(ids, 16), at)
	}
	turn := tr.Sessions()[0].Turns[1]
	if turn.Cause != CausePromptChanged || turn.DivergedBlock != 2 {
		t.Fatalf("turn %+v, want prompt_changed at block 2", turn)
	}
	if !slices.Equal(turn.ChangedFrom, prev[16:64]) || !slices.Equal(turn.ChangedTo, cur[16:64]) {
		t.Errorf("changed from %v to %v, want blocks 1 to 3 of each prompt", turn.ChangedFrom, turn.ChangedTo)
	}
	if first := tr.Sessions()[0].Turns[0]; first.ChangedFrom != nil || first.ChangedTo != nil {
		t.Errorf("the first turn has a change: %+v", first)
	}
}
