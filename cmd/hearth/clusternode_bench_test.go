package main

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
)

// BenchmarkClusterRemoteTTFT measures what a turn pays for being served by
// a peer's GPU: two daemons on loopback, a with one engine and b with one,
// streamed turns sent to a by round robin, the time to the first data
// chunk split by the worker that served it. It reports each median and the
// difference (the proxy hop: a's loopback forwarder, mTLS to b's cluster
// port, b's proxy to its engine).
func BenchmarkClusterRemoteTTFT(b *testing.B) {
	dirA := b.TempDir()
	port := freePortTB(b)
	token := clusterTokenTB(b, dirA, "a", fmt.Sprintf("127.0.0.1:%d", port))
	common := []string{"--sim", "1x4090", "--speedup", "100", "--mdns=false", "--cluster-routes-listen", "127.0.0.1:0", "--policy", "round_robin"}
	baseA, _ := serveTestUp(b, append(common, "--node", "a", "--data-dir", dirA, "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", port)))
	serveTestUp(b, append(common, "--node", "b", "--data-dir", b.TempDir(), "--cluster-listen", "127.0.0.1:0", "--join", token))
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(baseA + "/api/v1/nodes")
		if err == nil {
			var n adminapi.NodeList
			_ = decodeJSON(resp, &n)
			if len(n.Nodes) == 2 && len(n.Nodes[0].Engines)+len(n.Nodes[1].Engines) == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the two nodes did not see each other")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	ttft := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := fmt.Sprintf(`{"model":"qwen3-14b-fp8","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"turn %d"}]}`, i)
		start := time.Now()
		resp, err := http.Post(baseA+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				break
			}
		}
		d := time.Since(start)
		for sc.Scan() {
		}
		resp.Body.Close()
		w := "local"
		if resp.Header.Get("x-hearth-worker") == "b/gpu0" {
			w = "remote"
		}
		ttft[w] = append(ttft[w], d)
	}
	b.StopTimer()
	med := func(xs []time.Duration) float64 {
		if len(xs) == 0 {
			return 0
		}
		slices.Sort(xs)
		return float64(xs[len(xs)/2].Microseconds()) / 1000
	}
	p99 := func(xs []time.Duration) float64 {
		if len(xs) == 0 {
			return 0
		}
		return float64(xs[len(xs)*99/100].Microseconds()) / 1000
	}
	b.ReportMetric(med(ttft["local"]), "local-p50-ms")
	b.ReportMetric(med(ttft["remote"]), "remote-p50-ms")
	b.ReportMetric(med(ttft["remote"])-med(ttft["local"]), "added-p50-ms")
	b.ReportMetric(p99(ttft["local"]), "local-p99-ms")
	b.ReportMetric(p99(ttft["remote"]), "remote-p99-ms")
}
