package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

// Environment of a node process of BenchmarkKVEventPropagationNetns.
const (
	kvnsRole  = "HEARTH_KVNS_ROLE"  // "a" (the router) or "c" (the engine's node)
	kvnsDir   = "HEARTH_KVNS_DIR"   // shared directory: identities, token, times
	kvnsAddr  = "HEARTH_KVNS_ADDR"  // the node's address on the veth
	kvnsCount = "HEARTH_KVNS_COUNT" // batches to time
)

// kvnsPace is the time between two timed batches: the engine's node
// publishes open loop, as an engine does, not one batch after another's
// arrival.
const kvnsPace = time.Millisecond

// BenchmarkKVEventPropagationNetns is BenchmarkKVEventPropagation between
// two processes in network namespaces joined by a veth pair: node a (the
// router) in one, node c with the engine (the test publisher) in the
// other, the NATS route and the join over the veth. c publishes a batch
// every kvnsPace; each process notes the wall-clock time (one kernel, one
// clock) at which each batch passes each stage, and the latency is a's
// index holding a batch less c's publishing it. It needs root and ip
// netns.
func BenchmarkKVEventPropagationNetns(b *testing.B) {
	requireNetns(b)
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	prefix := "hk" + hex.EncodeToString(suffix)
	nsA, nsC := prefix+"a", prefix+"c"
	ip := func(args ...string) {
		b.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			b.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{nsA, nsC} {
		ip("netns", "add", ns)
		b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	ip("link", "add", prefix+"va", "type", "veth", "peer", "name", prefix+"vc")
	for _, l := range []struct{ ns, link, addr string }{{nsA, prefix + "va", "10.78.0.1"}, {nsC, prefix + "vc", "10.78.0.2"}} {
		ip("link", "set", l.link, "netns", l.ns)
		ip("-n", l.ns, "addr", "add", l.addr+"/24", "dev", l.link)
		ip("-n", l.ns, "link", "set", l.link, "up")
		ip("-n", l.ns, "link", "set", "lo", "up")
	}

	dir := b.TempDir()
	if _, err := Create(filepath.Join(dir, "a"), "a"); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(role, ns, addr string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run", "^TestKVNetnsNode$", "-test.v")
		cmd.Env = append(os.Environ(), kvnsRole+"="+role, kvnsDir+"="+dir, kvnsAddr+"="+addr, kvnsCount+"="+strconv.Itoa(b.N))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		return cmd, out
	}
	b.ReportAllocs()
	b.ResetTimer()
	procA, outA := start("a", nsA, "10.78.0.1")
	procC, outC := start("c", nsC, "10.78.0.2")
	errC := procC.Wait()
	errA := procA.Wait()
	b.StopTimer()
	if errA != nil || errC != nil {
		b.Fatalf("node a: %v\n%s\nnode c: %v\n%s", errA, outA, errC, outC)
	}

	pub, relay := readKVTimes(b, filepath.Join(dir, "c.times"))
	received, applied := readKVTimes(b, filepath.Join(dir, "a.times"))
	var total, zmq, nats, ingest []time.Duration
	for seq, p := range pub {
		done, ok := applied[seq]
		if !ok {
			b.Fatalf("batch %d never reached a's index", seq)
		}
		total = append(total, time.Duration(done-p))
		zmq = append(zmq, time.Duration(relay[seq]-p))
		nats = append(nats, time.Duration(received[seq]-relay[seq]))
		ingest = append(ingest, time.Duration(done-received[seq]))
	}
	if len(total) < b.N {
		b.Fatalf("%d of %d batches timed", len(total), b.N)
	}
	reportHops(b, total, zmq, nats, ingest)
}

// TestKVNetnsNode is a node process of BenchmarkKVEventPropagationNetns,
// which starts it in its namespace; run on its own, it skips.
func TestKVNetnsNode(t *testing.T) {
	role := os.Getenv(kvnsRole)
	if role == "" {
		t.Skip("skipping: a node process of BenchmarkKVEventPropagationNetns, which runs it in a network namespace")
	}
	dir, addr := os.Getenv(kvnsDir), os.Getenv(kvnsAddr)
	count, err := strconv.Atoi(os.Getenv(kvnsCount))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Wall-clock times: the two processes share the kernel's clock.
	var mu sync.Mutex
	times := [kvStages]map[uint64]int64{{}, {}, {}}
	trace := func(stage kvStage, seq uint64) {
		now := time.Now().UnixNano()
		mu.Lock()
		times[stage][seq] = now
		mu.Unlock()
	}
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	waitFile := func(name string) {
		for !exists(name) {
			if ctx.Err() != nil {
				t.Fatalf("waited for %s: %v", name, ctx.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	touch := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	newNode := func(id *Identity, name string, routes []string) *Node {
		rt, err := router.New(router.Config{Policy: router.PolicyHearth})
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{Identity: id, Name: name, ClusterListen: addr + ":0", RouteListen: addr + ":0", Routes: routes, Workers: rt, Load: rt, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		n.kvTrace.Store(&trace)
		return n
	}

	switch role {
	case "a":
		id, err := Load(filepath.Join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		n := newNode(id, "a", nil)
		tok, err := id.Token([]string{n.ProxyAddr()})
		if err != nil {
			t.Fatal(err)
		}
		touch("token", []byte(tok.String()))
		for {
			mu.Lock()
			warm := len(times[kvRemoteApplied]) > 0
			mu.Unlock()
			if warm {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("no batch of c's engine reached a")
			}
			time.Sleep(5 * time.Millisecond)
		}
		touch("warm", nil)
		waitFile("c.times")
		time.Sleep(time.Second) // the last batches on their way
		mu.Lock()
		touch("a.times", formatKVTimes(times[kvRemoteReceived], times[kvRemoteApplied]))
		mu.Unlock()
	case "c":
		waitFile("token")
		b, _ := os.ReadFile(filepath.Join(dir, "token"))
		tok, err := ParseToken(string(b))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Join(ctx, filepath.Join(dir, "c"), "c", tok)
		if err != nil {
			t.Fatal(err)
		}
		n := newNode(res.Identity, "c", res.Routes)
		pub, kvEndpoint := startPublisher(t)
		if _, err := n.AddLocalEngine(LocalEngine{
			Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 1 << 20},
			KVEvents: kvEndpoint,
		}); err != nil {
			t.Fatal(err)
		}
		tokens := make([]uint32, 16)
		for !exists("warm") {
			if ctx.Err() != nil {
				t.Fatal("a never got a batch")
			}
			tokens[0]++
			pub.publishStored(tokens)
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		published := map[uint64]int64{}
		for range count {
			tokens[0]++
			at := time.Now().UnixNano()
			published[pub.publishStored(tokens)] = at
			time.Sleep(kvnsPace)
		}
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		relayed := map[uint64]int64{}
		for seq := range published {
			relayed[seq] = times[kvRelayReceived][seq]
		}
		touch("c.times", formatKVTimes(published, relayed))
		mu.Unlock()
	default:
		t.Fatalf("role %q", role)
	}
}

// formatKVTimes writes "seq first second" lines for the batches in first.
func formatKVTimes(first, second map[uint64]int64) []byte {
	var sb strings.Builder
	for seq, t := range first {
		fmt.Fprintf(&sb, "%d %d %d\n", seq, t, second[seq])
	}
	return []byte(sb.String())
}

func readKVTimes(b *testing.B, path string) (first, second map[uint64]int64) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	first, second = map[uint64]int64{}, map[uint64]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var seq uint64
		var t1, t2 int64
		if _, err := fmt.Sscan(sc.Text(), &seq, &t1, &t2); err != nil {
			b.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		first[seq], second[seq] = t1, t2
	}
	return first, second
}

func requireNetns(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("skipping: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		b.Skip("skipping: ip is not installed")
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		b.Skipf("skipping: ip netns does not work here: %v %s", err, out)
	}
}
