package cluster

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// BenchmarkKVEventPropagation measures the time from an engine on node c
// publishing a stored block to node a's router index holding it: ZMQ to
// c's relay, NATS from c to a over the mTLS route, a's ingester. It
// reports the median and the 99th percentile of the whole way, and of each
// hop: zmq (the engine's publish to c's relay reading the batch, including
// the test publisher's own zmq4 socket), nats (c's relay to a's
// subscription: c's NATS client and server, the route, a's server and
// client) and ingest (a's subscription to its index holding the block).
//
// The times are taken where the batch passes (Node.kvTrace); the benchmark
// waits for the last one blocked, so that it does not take a core of its
// own from the nodes.
func BenchmarkKVEventPropagation(b *testing.B) {
	nodes, routers := benchCluster(b)
	a, c := nodes[0], nodes[2]
	pub, kvEndpoint := startPublisher(b)

	// stamps[stage] is when batch cur passed stage, since t0.
	t0 := time.Now()
	var cur atomic.Uint64
	var stamps [kvStages]atomic.Int64
	applied := make(chan struct{}, 1)
	trace := func(stage kvStage, seq uint64) {
		if seq != cur.Load() {
			return
		}
		stamps[stage].Store(int64(time.Since(t0)))
		if stage == kvRemoteApplied {
			select {
			case applied <- struct{}{}:
			default:
			}
		}
	}
	c.kvTrace.Store(&trace)
	a.kvTrace.Store(&trace)

	if _, err := c.AddLocalEngine(LocalEngine{
		Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 1 << 20},
		KVEvents: kvEndpoint,
	}); err != nil {
		b.Fatal(err)
	}
	id := waitWorker(b, routers[0], "c/gpu0")
	held := func(hashes []tokenizer.SeqHash) bool {
		var out [router.MaxWorkers]int
		routers[0].Index().Match(hashes, kvtier.GPU, &out)
		return out[id] == 1
	}
	tokens := make([]uint32, 16)
	// Warm up: the ZMQ subscription is up once a block gets through.
	clocktest.WaitFor(b, "the first block to reach a", 5*time.Second, func() bool {
		tokens[0]++
		pub.publishStored(tokens)
		time.Sleep(10 * time.Millisecond)
		return held(tokenizer.BlockHashes(tokens, 16))
	})
	time.Sleep(50 * time.Millisecond) // let the warm-up's stragglers pass
	select {
	case <-applied:
	default:
	}

	var total, zmq, nats, ingest []time.Duration
	timeout := time.NewTimer(time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tokens[0]++
		cur.Store(pub.nextSeq())
		for s := range stamps {
			stamps[s].Store(0)
		}
		start := time.Since(t0)
		pub.publishStored(tokens)
		timeout.Reset(5 * time.Second)
		select {
		case <-applied:
		case <-timeout.C:
			b.Fatalf("block %d never reached a", i)
		}
		timeout.Stop()
		relay, remote, done := time.Duration(stamps[kvRelayReceived].Load()), time.Duration(stamps[kvRemoteReceived].Load()), time.Duration(stamps[kvRemoteApplied].Load())
		if relay == 0 || remote == 0 {
			b.Fatalf("block %d: a stage was not traced (relay %v, remote %v)", i, relay, remote)
		}
		total = append(total, done-start)
		zmq = append(zmq, relay-start)
		nats = append(nats, remote-relay)
		ingest = append(ingest, done-remote)
	}
	b.StopTimer()
	if !held(tokenizer.BlockHashes(tokens, 16)) {
		b.Fatal("a's index does not hold the last block")
	}
	reportHops(b, total, zmq, nats, ingest)
}

// reportHops reports the p50 and p99 of a KV batch's whole way and of each
// hop on it: engine to relay (ZMQ), relay to the remote node (NATS), and
// the remote node's ingest.
func reportHops(b *testing.B, total, zmq, nats, ingest []time.Duration) {
	for _, m := range []struct {
		name string
		lat  []time.Duration
	}{{"", total}, {"zmq-", zmq}, {"nats-", nats}, {"ingest-", ingest}} {
		slices.Sort(m.lat)
		b.ReportMetric(float64(m.lat[len(m.lat)/2].Microseconds()), m.name+"p50-µs")
		b.ReportMetric(float64(m.lat[len(m.lat)*99/100].Microseconds()), m.name+"p99-µs")
	}
}

func benchCluster(b *testing.B) ([3]*Node, [3]*router.Router) {
	var nodes [3]*Node
	var routers [3]*router.Router
	idA, err := Create(b.TempDir(), "a")
	if err != nil {
		b.Fatal(err)
	}
	nodes[0], routers[0] = testNode(b, idA, "a", nil)
	tok, _ := idA.Token([]string{nodes[0].ProxyAddr()})
	for i, name := range []string{"b", "c"} {
		res, err := Join(b.Context(), b.TempDir(), name, tok)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i+1], routers[i+1] = testNode(b, res.Identity, name, res.Routes)
	}
	clocktest.WaitFor(b, "three nodes up", 10*time.Second, func() bool {
		return stateOf(nodes[0], nodes[2].id.NodeID()) == StateUp && stateOf(nodes[2], nodes[0].id.NodeID()) == StateUp
	})
	return nodes, routers
}
