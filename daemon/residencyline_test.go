package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/router"
)

// recordingMover moves nothing: it notes what the manager asked for.
type recordingMover struct {
	mu    sync.Mutex
	moves []string
}

func (r *recordingMover) note(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moves = append(r.moves, s)
	return nil
}

func (r *recordingMover) Load(_ context.Context, name string, _ bool) error {
	return r.note("load " + name)
}
func (r *recordingMover) Sleep(_ context.Context, name string) error { return r.note("sleep " + name) }
func (r *recordingMover) Stop(_ context.Context, name string) error  { return r.note("stop " + name) }

// TestGatewayRouterPassesSessionsToTheModels: the gateway's router puts
// each request in its model's line with its session, so that a session's
// tool pause is ended by that session's next request only: another
// session's request to the same model leaves it, and a request for the
// other model waits; the paused session's own next request ends it, and
// the other model then comes in without waiting for the pause's grace.
func TestGatewayRouterPassesSessionsToTheModels(t *testing.T) {
	t.Parallel()
	rt, err := router.New(router.Config{Policy: router.PolicyHearth})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"coder", "other"} {
		if _, err := rt.AddWorker(router.WorkerInfo{Name: m, Model: m, BaseURL: "http://127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	mv := &recordingMover{}
	mgr, err := models.New(models.Options{Capacity: 24 << 30, Mover: mv, PriorityWait: router.DefaultPriorityWait,
		Clock: clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)), // the grace never passes
		Models: []models.Model{
			{Name: "coder", Bytes: 20 << 30, Wake: time.Second, CanSleep: true},
			{Name: "other", Bytes: 20 << 30, Wake: time.Second, CanSleep: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	res := &residency{byModel: map[string]*models.Manager{"coder": mgr, "other": mgr}, byEngine: map[string]string{},
		managers: []*models.Manager{mgr}}
	g := &gatewayRouter{rt: rt, defaultPolicy: func() string { return "" }, residency: res}
	n := 0
	request := func(model, session string, wait time.Duration) error {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		id := string(rune('a' + n))
		_, err := g.Route(ctx, api.RouteRequest{ID: id, Model: model, SessionID: session, PromptTokens: 10})
		if err == nil {
			g.Free(id)
		}
		return err
	}
	if err := request("coder", "one", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	res.ToolPause("coder", "one")
	if err := request("coder", "two", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := request("other", "three", 100*time.Millisecond); !errors.Is(err, models.ErrBusy) {
		t.Fatalf("a request for the other model in session one's tool pause: %v, want it refused", err)
	}
	if err := request("coder", "one", 10*time.Second); err != nil { // the pause's session comes back
		t.Fatal(err)
	}
	if err := request("other", "three", 10*time.Second); err != nil {
		t.Fatalf("a request for the other model after session one's next turn: %v", err)
	}
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if want := []string{"load coder", "sleep coder", "load other"}; len(mv.moves) != 3 || mv.moves[2] != want[2] {
		t.Errorf("moves %q, want %q", mv.moves, want)
	}
}
