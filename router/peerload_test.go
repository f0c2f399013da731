package router

import (
	"fmt"
	"testing"
	"time"
)

// share passes one replica's own load on every worker to another, as the
// cluster's load subject does.
func share(from, to *Router, source string) {
	for _, w := range from.Workers() {
		to.SetPeerLoad(w.WorkerID, source, PeerLoad{Running: w.ActiveRequests, ActiveBlocks: w.ActiveBlocks, PendingPrefillTokens: w.PendingPrefillTokens})
	}
}

// Two router replicas (two nodes' daemons) send requests to the same two
// GPUs, turn about. Each alone sees only its own requests: with the same
// view of an idle cluster they pick the same GPU, and one GPU runs two
// requests while the other runs none. Seeing each other's load, they
// spread.
func TestReplicasSharingLoadSpreadRequests(t *testing.T) {
	for _, policy := range []string{PolicyHearth, PolicyKV, PolicyLeastLoaded} {
		for _, sharing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sharing=%v", policy, sharing), func(t *testing.T) {
				workers := []WorkerInfo{{Name: "n1/gpu0", CapacityBlocks: 1000}, {Name: "n2/gpu0", CapacityBlocks: 1000}}
				cfg := Config{Policy: policy, Seed: 1}
				a, _ := newTestRouter(t, cfg, workers...)
				b, _ := newTestRouter(t, cfg, workers...)
				worst := 0
				for i := 0; i < 8; i++ {
					from, to, name := a, b, "a"
					if i%2 == 1 {
						from, to, name = b, a, "b"
					}
					route(t, from, &Request{ID: fmt.Sprint(i), Hashes: chain(fmt.Sprint("p", i), 8), PromptTokens: 128})
					if sharing {
						share(from, to, name)
					}
					// What the GPUs really run: both replicas' requests.
					var running [2]int
					for _, r := range []*Router{a, b} {
						for _, w := range r.Workers() {
							running[w.WorkerID] += w.ActiveRequests
						}
					}
					worst = max(worst, running[0]-running[1], running[1]-running[0])
				}
				switch {
				case sharing && worst > 1:
					t.Errorf("sharing their load, the replicas still put %d more requests on one GPU than on the other", worst)
				case !sharing && worst < 2:
					t.Errorf("without sharing the replicas never piled onto one GPU (worst imbalance %d): the test proves nothing", worst)
				}
			})
		}
	}
}

// A replica that goes silent (its node died) stops weighing on the
// workers after PeerLoadTTL; one that keeps reporting does not.
func TestPeerLoadOfASilentReplicaExpires(t *testing.T) {
	r, clk := newTestRouter(t, Config{Policy: PolicyLeastLoaded, PeerLoadTTL: 3 * time.Second},
		WorkerInfo{Name: "w0", CapacityBlocks: 1000}, WorkerInfo{Name: "w1", CapacityBlocks: 1000})
	heavy := PeerLoad{Running: 4, ActiveBlocks: 400, PendingPrefillTokens: 4096}
	r.SetPeerLoad(0, "silent", heavy)
	r.SetPeerLoad(1, "alive", PeerLoad{Running: 1, ActiveBlocks: 10})
	if got := load(t, r, 0).Peer; got != heavy {
		t.Fatalf("w0's peer load %+v, want %+v", got, heavy)
	}
	if got := load(t, r, 0).ActiveRequests; got != 0 {
		t.Fatalf("peer load counted as this replica's own: %d running", got)
	}
	if d := route(t, r, &Request{ID: "1", Hashes: chain("x", 4)}); d.WorkerID != 1 {
		t.Fatalf("routed to %s while w0 carries another replica's load", d.Worker)
	}
	r.Free("1")

	clk.Advance(2 * time.Second)
	r.SetPeerLoad(1, "alive", PeerLoad{Running: 1, ActiveBlocks: 10}) // reported again
	clk.Advance(1500 * time.Millisecond)                              // silent for 3.5 s, alive for 1.5 s
	if d := route(t, r, &Request{ID: "2", Hashes: chain("y", 4)}); d.WorkerID != 0 {
		t.Fatalf("routed to %s: the silent replica's load did not expire", d.Worker)
	}
	if got := load(t, r, 0).Peer; got != (PeerLoad{}) {
		t.Fatalf("w0 still carries %+v of a silent replica", got)
	}
	if got := load(t, r, 1).Peer; got.ActiveBlocks != 10 {
		t.Fatalf("w1 lost the load of a replica that kept reporting: %+v", got)
	}
	// The zero load removes an entry; a gone worker takes its entries along.
	r.SetPeerLoad(1, "alive", PeerLoad{})
	if got := load(t, r, 1).Peer; got != (PeerLoad{}) {
		t.Fatalf("zero load left %+v", got)
	}
	r.SetPeerLoad(1, "alive", heavy)
	r.RemoveWorker(1)
	id, _ := r.AddWorker(WorkerInfo{Name: "w2"})
	if got := load(t, r, id).Peer; got != (PeerLoad{}) {
		t.Fatalf("a new worker in a reused id inherits %+v", got)
	}
}

// Another replica's load counts toward saturation, so a replica queues
// rather than overfill a GPU the others keep busy, and dispatches when
// their load drops.
func TestPeerLoadSaturatesAndReleases(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyHearth}, WorkerInfo{Name: "w0", CapacityBlocks: 100})
	r.SetPeerLoad(0, "b", PeerLoad{Running: 10, ActiveBlocks: 99})
	_, ticket, err := r.Enqueue(&Request{ID: "q", Hashes: chain("q", 2)})
	if err != nil || ticket == nil {
		t.Fatalf("with the GPU full of another replica's requests: ticket %v, err %v; want a queued ticket", ticket, err)
	}
	r.SetPeerLoad(0, "b", PeerLoad{Running: 1, ActiveBlocks: 10})
	select {
	case <-ticket.Done():
	default:
		t.Fatal("the other replica's load dropped, the queued request stayed queued")
	}
}
