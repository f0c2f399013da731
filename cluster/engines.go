package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/nats-io/nats.go"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/netguard"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	"github.com/hearth-llm/hearth/zmtp"
)

// LocalEngine is an engine of this node in service, as the fleet reports
// it: the worker it is in the local router and where its KV events are.
type LocalEngine struct {
	Worker   router.WorkerInfo
	KVEvents string // ZMQ PUB endpoint; "" when it publishes none
	KVReplay string
	Topic    string
	// EventFormat is the layout of its KV-event payloads
	// (runtime.EngineKind.EventFormat), which peers decode them by.
	EventFormat kvevents.Format
}

type localEngine struct {
	info    EngineInfo
	baseURL *url.URL
	eng     LocalEngine
	cancel  context.CancelFunc
	subs    []*nats.Subscription
	done    chan struct{}
}

func (l *localEngine) close() {
	l.cancel()
	for _, s := range l.subs {
		_ = s.Unsubscribe()
	}
	<-l.done
}

func (n *Node) kvSubject(nodeID, inc string) string {
	return n.subjectBase + ".kv." + nodeID + "." + inc
}

func (n *Node) replaySubject(nodeID, inc string) string {
	return n.subjectBase + ".replay." + nodeID + "." + inc
}

// AddLocalEngine offers a local engine to the cluster: peers see it in
// this node's heartbeats, reach it through the proxy, and get its KV
// events relayed with their sequence numbers. The returned func withdraws
// it.
func (n *Node) AddLocalEngine(e LocalEngine) (func(), error) {
	base, err := url.Parse(e.Worker.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: engine %s: %w", e.Worker.Name, err)
	}
	w := e.Worker
	l := &localEngine{
		info: EngineInfo{
			Name: w.Name, Model: w.Model, Incarnation: newIncarnation(), CapacityBlocks: w.CapacityBlocks,
			RAMCapacityBlocks: w.RAMCapacityBlocks, BlockBytes: w.BlockBytes, PrefillTokensPerSec: w.PrefillTokensPerSec,
			LoadBytesPerSec: w.LoadBytesPerSec, Approximate: w.Approximate || e.KVEvents == "",
			EventFormat: e.EventFormat.String(),
		},
		baseURL: base, eng: e, done: make(chan struct{}),
	}
	ctx, cancel := n.ctxUntilStop()
	l.cancel = cancel
	if e.KVEvents != "" {
		go func() {
			defer close(l.done)
			n.relay(ctx, l)
		}()
		if e.KVReplay != "" {
			sub, err := n.nc.Subscribe(n.replaySubject(n.id.NodeID(), l.info.Incarnation), func(m *nats.Msg) { n.serveReplay(ctx, l, m) })
			if err != nil {
				cancel()
				return nil, fmt.Errorf("cluster: %w", err)
			}
			l.subs = append(l.subs, sub)
		}
	} else {
		close(l.done)
	}
	l.info.URL = "https://" + n.proxyAddr + "/engine/" + l.info.Incarnation
	l.info.State = EngineReady
	n.mu.Lock()
	n.local[l.info.Incarnation] = l
	gen := n.nextEngineGenLocked()
	n.mu.Unlock()
	n.publishEngine(EngineReady, l.info, gen)
	return func() {
		n.mu.Lock()
		_, ok := n.local[l.info.Incarnation]
		delete(n.local, l.info.Incarnation)
		info, gen := l.info, n.nextEngineGenLocked()
		n.mu.Unlock()
		if ok {
			n.publishEngine(EngineRemoved, info, gen)
			l.close()
		}
	}, nil
}

// kvStage is a point on a KV event batch's way from an engine to a peer's
// index, where Node.kvTrace hears of it: the benchmark times each hop.
type kvStage int

const (
	kvRelayReceived  kvStage = iota // the owner's relay has read it from the engine
	kvRemoteReceived                // a peer's subscription has it
	kvRemoteApplied                 // a peer's index holds it
	kvStages
)

// traceKV tells the benchmark's tracer, if any, that batch seq reached
// stage.
func (n *Node) traceKV(stage kvStage, seq uint64) {
	if f := n.kvTrace.Load(); f != nil {
		(*f)(stage, seq)
	}
}

// relay follows a local engine's KV events over a ZMTP connection of its
// own and publishes each batch as seq (8 bytes, big-endian) + payload. It
// reads the engine on its own goroutine (package zmtp) and builds every
// message in one buffer: NATS copies what it publishes before Publish
// returns.
func (n *Node) relay(ctx context.Context, l *localEngine) {
	subject := n.kvSubject(n.id.NodeID(), l.info.Incarnation)
	var data []byte
	for ctx.Err() == nil {
		sub, err := zmtp.Dial(ctx, l.eng.KVEvents, zmq4.Sub)
		if err == nil {
			// A ZMTP 3.0 subscription is a message: 1, then the topic.
			err = sub.Send(append([]byte{1}, l.eng.Topic...))
			for err == nil {
				var frames [][]byte
				frames, err = sub.Recv()
				if err != nil {
					break
				}
				seq, payload, perr := kvevents.ParseMessage(frames)
				if perr != nil {
					continue
				}
				n.traceKV(kvRelayReceived, seq)
				data = append(binary.BigEndian.AppendUint64(data[:0], seq), payload...)
				_ = n.nc.Publish(subject, data)
			}
			sub.Close()
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Debug("cluster: kv relay reconnecting", "engine", l.info.Name, "error", err)
		select {
		case <-ctx.Done():
		case <-n.clock.After(time.Second):
		}
	}
}

// replayChunkBytes bounds one replay reply; the asker asks again from
// where it stopped.
const replayChunkBytes = 4 << 20

// serveReplay answers a peer's replay request for a local engine from the
// engine's replay socket. Reply: a flag byte (1: more follows), then
// batches as seq (8) + length (4) + payload.
func (n *Node) serveReplay(ctx context.Context, l *localEngine, m *nats.Msg) {
	if len(m.Data) != 8 {
		return
	}
	from := binary.BigEndian.Uint64(m.Data)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := []byte{0}
	d, err := zmtp.Dial(rctx, l.eng.KVReplay, zmq4.Dealer)
	if err != nil {
		_ = m.Respond(out)
		return
	}
	defer d.Close()
	if err := d.Send(kvevents.ReplayRequest(from)...); err != nil {
		_ = m.Respond(out)
		return
	}
	for {
		frames, err := d.Recv()
		if err != nil {
			break
		}
		seq, payload, end, err := kvevents.ParseReplayReply(frames)
		if err != nil || end {
			break
		}
		out = binary.BigEndian.AppendUint64(out, seq)
		out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
		out = append(out, payload...)
		if len(out) > replayChunkBytes {
			out[0] = 1
			break
		}
	}
	_ = m.Respond(out)
}

// natsReplay is a remote engine's replay source: requests to the owning
// node, which asks its engine.
type natsReplay struct {
	nc      *nats.Conn
	subject string
}

func (r natsReplay) Replay(ctx context.Context, from uint64, fn func(seq uint64, payload []byte)) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := r.nc.RequestWithContext(rctx, r.subject, binary.BigEndian.AppendUint64(nil, from))
		cancel()
		if err != nil {
			return fmt.Errorf("cluster: replay: %w", err)
		}
		b := msg.Data
		if len(b) == 0 {
			return errors.New("cluster: empty replay reply")
		}
		more, b := b[0] == 1, b[1:]
		for len(b) >= 12 {
			seq := binary.BigEndian.Uint64(b)
			size := int(binary.BigEndian.Uint32(b[8:]))
			if len(b) < 12+size {
				return errors.New("cluster: truncated replay reply")
			}
			fn(seq, b[12:12+size])
			from = seq + 1
			b = b[12+size:]
		}
		if !more {
			return nil
		}
	}
}

// A remote engine's subscription queues at most this many batches (and
// bytes) while its ingester is busy, a replay in progress; NATS drops what
// comes beyond, and the ingester replays it as a gap.
const (
	kvPendingBatches = 4096
	kvPendingBytes   = 64 << 20
)

// remoteEngine is a peer's engine made a worker of the local router.
type remoteEngine struct {
	nodeID string
	info   EngineInfo
	name   string // the worker's name in the local router
	worker router.WorkerID
	srv    *http.Server
	sub    *nats.Subscription
	cancel context.CancelFunc
	done   chan struct{}

	// drained is what the worker's drain was last set to: its node's
	// (Heartbeat.Drained). Read and written under Node.mu.
	drained bool

	// ingestMu is held while the ingester syncs and while it applies a
	// batch; closed, under it, tells a batch still queued in the
	// subscription that the worker is gone.
	ingestMu sync.Mutex
	closed   bool
}

func (r *remoteEngine) close(n *Node) {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
	r.cancel()
	<-r.done
	// A batch may be in its callback still (Unsubscribe does not wait):
	// the worker leaves the router only once no batch can reach its index.
	r.ingestMu.Lock()
	r.closed = true
	r.ingestMu.Unlock()
	if n.cfg.Workers != nil {
		n.cfg.Workers.RemoveWorker(r.worker)
	}
	r.srv.Close()
}

// reconcile makes the local router's remote workers match the engines of
// the routable peers.
func (n *Node) reconcile() {
	// One at a time: heartbeats, the judging loop and API reads all call
	// it, and two passes adding the same engine would put a duplicate
	// worker into routing for a moment.
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	want := map[string]Member{}
	drained := map[string]bool{} // by node id
	wantInfo := map[string]EngineInfo{}
	wantName := map[string]string{}
	members := n.members.list()
	clash := n.clashingNames(members)
	for _, m := range members {
		if m.NodeID == n.id.NodeID() || !m.State.Routable() {
			continue
		}
		drained[m.NodeID] = m.Drained != ""
		for _, e := range m.Engines {
			if routableEngine(e.State) {
				want[e.Incarnation], wantInfo[e.Incarnation] = m, e
				wantName[e.Incarnation] = workerName(m.Heartbeat, e.Name, clash)
			}
		}
	}
	n.mu.Lock()
	var drop []*remoteEngine
	for inc, r := range n.remote {
		// A worker whose name must change (a node of the same name came)
		// leaves and comes back under its new name.
		if _, ok := want[inc]; !ok || r.name != wantName[inc] {
			drop = append(drop, r)
			delete(n.remote, inc)
		}
	}
	var add []string
	type drainChange struct {
		r       *remoteEngine
		drained bool
	}
	var redrain []drainChange
	for inc := range want {
		r, ok := n.remote[inc]
		if !ok {
			add = append(add, inc)
		} else if r.drained != drained[r.nodeID] {
			r.drained = drained[r.nodeID]
			redrain = append(redrain, drainChange{r, r.drained})
		}
	}
	closed := n.isStopped()
	n.mu.Unlock()
	for _, c := range redrain {
		if n.cfg.Workers == nil {
			break
		}
		n.log.Info("cluster: remote engine drain changed", "engine", c.r.name, "node", c.r.nodeID, "drained", c.drained)
		n.cfg.Workers.SetDrained(c.r.worker, c.drained)
	}
	for _, r := range drop {
		n.log.Info("cluster: remote engine leaves routing", "engine", r.info.Name, "node", r.nodeID)
		r.close(n)
	}
	if closed || n.cfg.Workers == nil {
		return
	}
	sort.Strings(add)
	for _, inc := range add {
		m, e := want[inc], wantInfo[inc]
		r, err := n.attachRemote(m, e, wantName[inc])
		if err != nil {
			n.log.Warn("cluster: remote engine not routable", "engine", e.Name, "node", m.NodeID, "error", err)
			continue
		}
		if drained[m.NodeID] {
			r.drained = true
			n.cfg.Workers.SetDrained(r.worker, true)
		}
		n.mu.Lock()
		if _, dup := n.remote[inc]; dup || n.isStopped() {
			n.mu.Unlock()
			r.close(n)
			continue
		}
		n.remote[inc] = r
		n.mu.Unlock()
		n.log.Info("cluster: remote engine in routing", "engine", r.name, "node", m.NodeID, "via", r.srv.Addr)
	}
}

func (n *Node) isStopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// attachRemote starts a loopback forwarder for a peer's engine (so the
// gateway's plain HTTP engine client reaches it through mTLS), registers it
// with the router and feeds the router its relayed KV events.
func (n *Node) attachRemote(m Member, e EngineInfo, name string) (*remoteEngine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	target := &url.URL{Scheme: "https", Host: m.Proxy, Path: "/engine/" + e.Incarnation}
	transport := &http.Transport{
		TLSClientConfig:     n.mutualTLS(m.NodeID),
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path = target.Path + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
	srv := netguard.Server(&http.Server{Handler: netguard.BodyDeadline(fullDuplex(proxy), netguard.BodyTimeout), Addr: ln.Addr().String(),
		IdleTimeout: n.cfg.IdleTimeout})
	go func() { _ = srv.Serve(netguard.Listen(ln, netguard.Config{Logger: n.log})) }()
	r := &remoteEngine{nodeID: m.NodeID, info: e, name: name, srv: srv, done: make(chan struct{})}
	info := router.WorkerInfo{
		Name: name, BaseURL: "http://" + ln.Addr().String(), Model: e.Model, CapacityBlocks: e.CapacityBlocks,
		PrefillTokensPerSec: e.PrefillTokensPerSec, RAMCapacityBlocks: e.RAMCapacityBlocks, BlockBytes: e.BlockBytes,
		LoadBytesPerSec: e.LoadBytesPerSec, Approximate: e.Approximate,
	}
	r.worker, err = n.cfg.Workers.AddWorker(info)
	if err != nil {
		srv.Close()
		return nil, err
	}
	ctx, cancel := n.ctxUntilStop()
	r.cancel = cancel
	if e.Approximate {
		close(r.done)
		return r, nil
	}
	// A format this node does not know (a newer peer's) reads as vLLM's.
	format, _ := kvevents.ParseFormat(e.EventFormat)
	ing := ingest.NewIngester(ingest.IngesterConfig{WorkerID: r.worker, EventFormat: format, Logger: n.log.With("remote_engine", e.Name)},
		n.cfg.Workers.Index(), natsReplay{nc: n.nc, subject: n.replaySubject(m.NodeID, e.Incarnation)})
	// Batches are applied in the subscription's callback, on the goroutine
	// NATS delivers them on: a hand-off to a goroutine of ours would be one
	// more wake-up per batch. The ingester syncs first (subscribed before,
	// so that nothing published meanwhile is lost): until then the callback
	// waits on ingestMu and NATS queues what arrives. A batch NATS drops
	// (a slow consumer, beyond its pending limits) is a gap, which the
	// ingester replays.
	r.ingestMu.Lock()
	r.sub, err = n.nc.Subscribe(n.kvSubject(m.NodeID, e.Incarnation), func(msg *nats.Msg) {
		b := msg.Data
		if len(b) < 8 {
			return
		}
		seq := binary.BigEndian.Uint64(b)
		n.traceKV(kvRemoteReceived, seq)
		r.ingestMu.Lock()
		defer r.ingestMu.Unlock()
		if r.closed || ctx.Err() != nil {
			return
		}
		if err := ing.HandleLive(ctx, seq, b[8:]); err != nil {
			return
		}
		n.traceKV(kvRemoteApplied, seq)
	})
	if err == nil {
		err = r.sub.SetPendingLimits(kvPendingBatches, kvPendingBytes)
	}
	if err != nil {
		r.ingestMu.Unlock()
		cancel()
		close(r.done)
		r.close(n)
		return nil, err
	}
	go func() {
		defer close(r.done)
		defer r.ingestMu.Unlock()
		_ = ing.Sync(ctx) // an error: ctx ended, and so does every callback
	}()
	return r, nil
}

// proxyHandler forwards a peer's request to a local engine. Only nodes of
// the cluster whose certificates are not revoked get through, checked on
// every request so that a revocation cuts kept connections too.
func (n *Node) proxyHandler(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		http.Error(w, "a cluster certificate is required", http.StatusForbidden)
		return
	}
	if n.revoked.serialRevoked(r.TLS.PeerCertificates[0].SerialNumber.Text(16)) {
		http.Error(w, "certificate revoked", http.StatusForbidden)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/engine/")
	inc, path, _ := strings.Cut(rest, "/")
	n.mu.Lock()
	l, ok := n.local[inc]
	n.mu.Unlock()
	if !ok {
		http.Error(w, "no such engine on this node", http.StatusNotFound)
		return
	}
	base := l.baseURL
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = base.Scheme, base.Host
			pr.Out.URL.Path = strings.TrimSuffix(base.Path, "/") + "/" + path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = base.Host
		},
		Transport:     n.engineTransport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
	fullDuplex(p).ServeHTTP(w, r)
}

// fullDuplex serves a proxy so that it may start the answer while its
// transport still reads the request it forwards.
//
// Without it, streams through a peer were cut now and then after their
// first bytes ("ReverseProxy read error during body copy: use of closed
// network connection"; the client got a 502 "engine stream: unexpected
// EOF"). When a handler writes the response header before the request
// body was seen to its end, net/http's HTTP/1 server reads the rest of the
// body itself and closes it. A ReverseProxy's transport copies the body to
// the upstream from a goroutine of its own and, with a Content-Length,
// reads once more after the last byte to make sure nothing follows. A
// streaming engine sends its header as soon as it has the request, and
// these proxies pass it on at once (FlushInterval -1); when it came back
// between the transport's last write and that read, the read found the
// body closed by the server, the transport took that for a failed request
// and closed its connection to the upstream, under the answer it was
// streaming. Both hops have the race: the loopback forwarder (upstream:
// the peer's proxy) and the peer's proxy (upstream: its engine). In full
// duplex the server leaves the body to the handler.
// TestStreamsThroughAPeerAreNotCut puts every request into that window.
//
// In full duplex the proxy may return while its transport still reads the
// body, or before the body's end was read at all (the upstream answered
// first); net/http then reads the connection twice at once and panics
// ("invalid concurrent Body.Read call", on the transport's goroutine, which
// kills the process). netguard.FullDuplex fences the body and reads it to
// its end before the proxy's handler returns.
// TestABodyLeftBehindByAnAnswerKeepsTheConnection puts a request there.
func fullDuplex(h http.Handler) http.Handler {
	return netguard.FullDuplex(h)
}

// RemoteName is the worker name of a peer's engine: the peer's node name
// (its id when it has none) and the engine's GPU part, "node/gpuN", so that
// engines of nodes that name their GPUs alike stay apart. Where nodes share
// a name, Node.RemoteWorkerName tells the name a node's router uses.
func RemoteName(hb Heartbeat, engine string) string {
	return workerName(hb, engine, nil)
}

// RemoteWorkerName is the name of a peer's engine in this node's router:
// RemoteName, or the peer's node id in place of its name where another
// node of the cluster, this one included, has that name too (machines
// left with a distribution's default host name).
func (n *Node) RemoteWorkerName(m Member, e EngineInfo) string {
	n.mu.Lock()
	r := n.remote[e.Incarnation]
	n.mu.Unlock()
	if r != nil && r.nodeID == m.NodeID {
		return r.name
	}
	return workerName(m.Heartbeat, e.Name, n.clashingNames(n.members.list()))
}

// clashingNames are the node names that more than one node of members, or
// of members and this node, holds.
func (n *Node) clashingNames(members []Member) map[string]bool {
	holders := map[string]map[string]bool{n.cfg.Name: {n.id.NodeID(): true}}
	for _, m := range members {
		if holders[m.Name] == nil {
			holders[m.Name] = map[string]bool{}
		}
		holders[m.Name][m.NodeID] = true
	}
	clash := map[string]bool{}
	for name, ids := range holders {
		if len(ids) > 1 {
			clash[name] = true
		}
	}
	return clash
}

// workerName is RemoteName with the node id in place of a name in clash.
func workerName(hb Heartbeat, engine string, clash map[string]bool) string {
	node := hb.Name
	if node == "" || clash[node] {
		node = hb.NodeID
	}
	gpu := engine
	if i := strings.LastIndexByte(engine, '/'); i >= 0 {
		gpu = engine[i+1:]
	}
	return node + "/" + gpu
}

func sortEngines(es []EngineInfo) {
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
}
