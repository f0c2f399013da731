package daemon

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/cluster"
)

// waker wakes the rigs named by --wake while requests wait in this node's
// router for KV room (every engine of their model full): a rig asleep in
// its owner's absence joins the cluster again when it is needed. It looks
// every wakeLook, and sends again only after wakeAgain, the time a rig
// takes to boot and its engines to load, so that one busy spell wakes
// each rig once.
type waker struct {
	macs   []net.HardwareAddr
	addr   string
	queued func() int
	send   func(ctx context.Context, mac net.HardwareAddr, addr string) error
	clk    clock.Clock
	log    *slog.Logger
	last   time.Time
}

const (
	wakeLook  = 5 * time.Second
	wakeAgain = 2 * time.Minute
)

// newWaker is the waker of c's --wake MACs over the router's queue; nil
// when none is named.
func newWaker(c ClusterConfig, queued func() int, clk clock.Clock, log *slog.Logger) *waker {
	if len(c.Wake) == 0 {
		return nil
	}
	w := &waker{addr: c.WakeAddr, queued: queued, send: cluster.Wake, clk: clock.Or(clk), log: log}
	for _, s := range c.Wake {
		if mac, err := cluster.ParseWakeMAC(s); err == nil { // the flag checked it
			w.macs = append(w.macs, mac)
		}
	}
	return w
}

// Run looks at the queue every wakeLook until ctx ends.
func (w *waker) Run(ctx context.Context) error {
	tick, stop := w.clk.NewTicker(wakeLook)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			w.check(ctx)
		}
	}
}

// check wakes every rig if requests wait and none was woken within
// wakeAgain. A packet that cannot be sent is logged: the next look
// tries again.
func (w *waker) check(ctx context.Context) {
	n := w.queued()
	if n == 0 || !w.last.IsZero() && w.clk.Now().Sub(w.last) < wakeAgain {
		return
	}
	sent := false
	for _, mac := range w.macs {
		if err := w.send(ctx, mac, w.addr); err != nil {
			w.log.Warn("waking a rig", "mac", mac.String(), "addr", w.addr, "err", err)
			continue
		}
		sent = true
		w.log.Info("requests wait for KV room: woke a rig", "mac", mac.String(), "addr", w.addr, "waiting", n)
	}
	if sent {
		w.last = w.clk.Now()
	}
}
