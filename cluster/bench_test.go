package cluster

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// BenchmarkKVEventPropagation measures the time from an engine on node c
// publishing a stored block to node a's router index holding it: ZMQ to
// c's relay, NATS from c to a over the mTLS route, a's ingester. It
// reports the median and the 99th percentile.
func BenchmarkKVEventPropagation(b *testing.B) {
	nodes, routers := benchCluster(b)
	c := nodes[2]
	pub, kvEndpoint := startPublisher(b)
	if _, err := c.AddLocalEngine(LocalEngine{
		Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 1 << 20},
		KVEvents: kvEndpoint,
	}); err != nil {
		b.Fatal(err)
	}
	var id router.WorkerID
	waitFor(b, "a's router to have c/gpu0", 5*time.Second, func() bool {
		var ok bool
		id, ok = routers[0].WorkerByName("c/gpu0")
		return ok
	})
	held := func(hashes []tokenizer.SeqHash) bool {
		var out [router.MaxWorkers]int
		routers[0].Index().Match(hashes, kvbm.TierGPU, &out)
		return out[id] == 1
	}
	tokens := make([]uint32, 16)
	// Warm up: the ZMQ subscription is up once a block gets through.
	waitFor(b, "the first block to reach a", 5*time.Second, func() bool {
		tokens[0]++
		pub.publishStored(tokens)
		time.Sleep(10 * time.Millisecond)
		return held(tokenizer.BlockHashes(tokens, 16))
	})
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tokens[0]++
		hashes := tokenizer.BlockHashes(tokens, 16)
		start := time.Now()
		pub.publishStored(tokens)
		for !held(hashes) {
			if time.Since(start) > 5*time.Second {
				b.Fatalf("block %d never reached a", i)
			}
			runtime.Gosched()
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
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
	waitFor(b, "three nodes up", 10*time.Second, func() bool {
		return stateOf(nodes[0], nodes[2].id.NodeID()) == StateUp && stateOf(nodes[2], nodes[0].id.NodeID()) == StateUp
	})
	return nodes, routers
}
