package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/netguard"
	"github.com/hearth-llm/hearth/router"
)

// sseEngine streams a chat completion the way vLLM does: the header at
// once, then SSE chunks a token's time apart, each flushed, and [DONE]. It
// answers as soon as it has decoded the request's JSON, before the body
// has ended (a full-duplex HTTP/1.1 server may), so that the answer is on
// its way back through the proxies while they still forward the request.
// Its first chunk echoes the prompt's first word, which tells the client
// the answer is its own. Served through netguard.FullDuplex, it reads the
// body's rest before its handler returns: net/http would read it after,
// and panic on its next read of the connection.
func sseEngine(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(netguard.FullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 1 {
			http.Error(w, fmt.Sprintf("request: %v", err), http.StatusBadRequest)
			return
		}
		echo, _, _ := strings.Cut(req.Messages[0].Content, " ")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		f.Flush()
		for i := range 6 {
			time.Sleep(2 * time.Millisecond) // a token's decode time
			word := fmt.Sprintf("word%d", i)
			if i == 0 {
				word = echo
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word+" ")
			f.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamsThroughAPeerAreNotCut streams 400 chat completions, eight at a
// time, each with a prompt of a few kilobytes as an agent sends, from a's
// loopback forwarder through c's proxy to c's engine, and fails on any
// answer that does not arrive whole. Each proxy on the way passes the
// answer's header on while its transport may still be finishing the
// request it forwards; that race cut a stream now and then (see
// fullDuplex). Here the client holds back the last byte of each request
// and the engine answers before it, which puts every request into the
// race's window: without full duplex on both hops a run cut 1 to 9 of its
// 400 streams, in every run tried.
func TestStreamsThroughAPeerAreNotCut(t *testing.T) {
	// The race is between two goroutines of a proxy, its transport's
	// writer and its server's connection; on one P the writer always
	// finishes first and the test could not fail.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	nodes, routers := testCluster(t)
	c := nodes[2]
	engine := sseEngine(t)
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	base := workerURL(t, routers[0], "c/gpu0")

	const requests, parallel = 400, 8
	prompt := strings.Repeat("The cluster relays KV events between nodes. ", 80)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var (
		next, done, cut atomic.Int32
		mu              sync.Mutex
		first           string
		wg              sync.WaitGroup
	)
	deadline := time.Now().Add(20 * time.Second)
	for range parallel {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= requests && time.Now().Before(deadline); i = int(next.Add(1)) {
				body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"%d %s"}]}`+"\n", i, prompt)
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", &lateEnd{rest: []byte(body)})
				req.ContentLength = int64(len(body))
				resp, err := client.Do(req)
				var got []byte
				if err == nil {
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					own := []byte(fmt.Sprintf(`"content":"%d "`, i))
					if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(got, own) || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n"))) {
						err = fmt.Errorf("%d, answer %q", resp.StatusCode, got)
					}
				}
				done.Add(1)
				if err != nil {
					cut.Add(1)
					mu.Lock()
					if first == "" {
						first = fmt.Sprintf("request %d: %v (after %d bytes)", i, err, len(got))
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	sent := int(done.Load())
	if n := cut.Load(); n > 0 {
		t.Fatalf("%d of %d streams through c's proxy were cut; first: %s", n, sent, first)
	}
	if sent < requests {
		t.Fatalf("only %d of %d streams in 20 s", sent, requests)
	}
}

// lateEnd is a request body that gives all but its last byte at once and
// the last one 5 ms later, while the answer is streaming.
type lateEnd struct {
	rest []byte
	held bool
}

func (b *lateEnd) Read(p []byte) (int, error) {
	switch {
	case len(b.rest) == 0:
		return 0, io.EOF
	case len(b.rest) == 1 && !b.held:
		b.held = true
		time.Sleep(5 * time.Millisecond)
	}
	n := copy(p, b.rest[:max(1, len(b.rest)-1)])
	b.rest = b.rest[n:]
	return n, nil
}

// TestAStreamCutAtThePeerArrivesCut: when the peer's engine dies in the
// middle of an answer, or the peer itself stops, the client of a's
// forwarder sees the stream break off (io.ErrUnexpectedEOF), never a clean
// end, so that the gateway ends its client's stream with an error in the
// client's dialect (api's TestMidStreamFailureEndsWithDialectError).
func TestAStreamCutAtThePeerArrivesCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(c *Node, closeEngineConn func())
	}{
		{"engine dies", func(_ *Node, closeEngineConn func()) { closeEngineConn() }},
		{"peer stops", func(c *Node, _ func()) { c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, routers := testCluster(t)
			c := nodes[2]
			cut := make(chan func(), 1)
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one \"}}]}\n\n")
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				cut <- func() { conn.Close() }
			}))
			defer engine.Close()
			if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
				t.Fatal(err)
			}
			base := workerURL(t, routers[0], "c/gpu0")
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, 16)
			if _, err := io.ReadFull(resp.Body, first); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("first chunk: %d %v", resp.StatusCode, err)
			}
			closeEngineConn := <-cut
			defer closeEngineConn()
			tc.cut(c, closeEngineConn)
			rest, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("after the cut: %v, then %q", err, rest)
			}
		})
	}
}

// TestABodyLeftBehindByAnAnswerKeepsTheConnection: c's engine answers
// before a request's body has ended, without reading it (as an engine
// answers an error). The client of a's forwarder reads the whole answer,
// then sends the body's rest and, on the same connection, the next
// request. Each proxy on the way returns once it has passed the answer on,
// while its transport still waits for the body's rest. Served in full
// duplex without a fence, net/http read that rest after the handler had
// returned: its next read of the connection panicked (the connection
// dropped, or, when that read was the next request's body on the
// transport's goroutine, the process died), or it took the body's rest for
// the next request. Every request must get its engine's answer, on one
// connection.
func TestABodyLeftBehindByAnAnswerKeepsTheConnection(t *testing.T) {
	nodes, routers := testCluster(t)
	c := nodes[2]
	engine := httptest.NewUnstartedServer(netguard.FullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := "early " + r.URL.Query().Get("n")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		io.WriteString(w, answer)
		w.(http.Flusher).Flush()
	})))
	engine.Start()
	t.Cleanup(engine.Close)
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	base := workerURL(t, routers[0], "c/gpu0")
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	const held = 10
	var rest string // the previous request's body's rest, sent with this request
	for i := range 20 {
		req := fmt.Sprintf("POST /v1/chat/completions?n=%d HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			i, len(body), body[:len(body)-held])
		if _, err := io.WriteString(conn, rest+req); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		rest = body[len(body)-held:]
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("early %d", i); err != nil || resp.StatusCode != http.StatusOK || string(got) != want {
			t.Fatalf("request %d: %d %q %v, want %q", i, resp.StatusCode, got, err, want)
		}
	}
}
