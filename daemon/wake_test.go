package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// TestWakerWakesRigsWhileRequestsWait: no packet while nothing waits;
// one per rig when requests wait; none again within wakeAgain however
// long they wait; again after it; a send that fails is tried at the next
// look.
func TestWakerWakesRigsWhileRequestsWait(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC))
	queued := 0
	var sent []string
	fail := false
	w := newWaker(ClusterConfig{Wake: []string{"a8:a1:59:00:00:01", "a8:a1:59:00:00:02"}, WakeAddr: "192.168.1.255:9"},
		func() int { return queued }, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.send = func(_ context.Context, mac net.HardwareAddr, addr string) error {
		if fail {
			return errors.New("network is unreachable")
		}
		sent = append(sent, mac.String()+"@"+addr)
		return nil
	}
	ctx := context.Background()
	w.check(ctx)
	if len(sent) != 0 {
		t.Fatalf("woke %v with nothing waiting", sent)
	}
	queued = 3
	fail = true
	w.check(ctx)
	fail = false
	clk.Advance(wakeLook)
	w.check(ctx)
	if len(sent) != 2 || sent[0] != "a8:a1:59:00:00:01@192.168.1.255:9" || sent[1] != "a8:a1:59:00:00:02@192.168.1.255:9" {
		t.Fatalf("sent %v, want both rigs once, after the failed send", sent)
	}
	for range 10 {
		clk.Advance(wakeLook)
		w.check(ctx)
	}
	if len(sent) != 2 {
		t.Fatalf("sent %v within %v of the first wake", sent, wakeAgain)
	}
	clk.Advance(wakeAgain)
	w.check(ctx)
	if len(sent) != 4 {
		t.Errorf("sent %v, want both rigs again after %v", sent, wakeAgain)
	}
	if newWaker(ClusterConfig{}, func() int { return 1 }, clk, slog.Default()) != nil {
		t.Error("a waker without --wake")
	}
}
