package console

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hearth-llm/hearth/apikey"
)

// leakOptions ignores fasthttp's own background goroutines: the server
// date updater (process-wide, never stops) and the worker pool's cleaner,
// which exits only after its idle sleep. Goroutines that exist when a test
// starts are ignored too; everything else a test leaves behind fails it.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	}
}

// liveServer is a harness served on a real loopback listener with its hub
// running, as the daemon runs it.
type liveServer struct {
	*harness
	addr     string
	stopHub  context.CancelFunc
	hubDone  chan error
	serveErr chan error
}

func startLive(t *testing.T, src *fakeSources, opts ...harnessOption) *liveServer {
	t.Helper()
	h := newHarness(t, src, opts...)
	h.c.hub.unsubscribed = make(chan struct{}, 64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &liveServer{harness: h, addr: ln.Addr().String(), stopHub: cancel,
		hubDone: make(chan error, 1), serveErr: make(chan error, 1)}
	go func() { s.hubDone <- h.c.Run(ctx) }()
	go func() { s.serveErr <- h.app.Listener(ln) }()
	// Run has started once both of its tickers exist.
	for range 2 {
		<-h.clock.created
	}
	return s
}

// stop ends the hub and the server and waits for both.
func (s *liveServer) stop(t *testing.T) {
	t.Helper()
	s.stopHub()
	if err := <-s.hubDone; err != nil {
		t.Errorf("hub: %v", err)
	}
	if err := s.app.Shutdown(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-s.serveErr; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// stream is a raw SSE client on its own connection, so a test can drop it
// the way a closed browser tab does.
type stream struct {
	conn net.Conn
	r    *bufio.Reader
}

func openStream(t *testing.T, addr, topic string, cookie *http.Cookie) (*stream, int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A safety net so a broken test fails instead of hanging; no test
	// relies on it to pass.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /console/events/" + topic + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/html, text/event-stream\r\n"
	if cookie != nil {
		req += "Cookie: " + cookie.Name + "=" + cookie.Value + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// Read the body through the chunked decoder.
	return &stream{conn: conn, r: bufio.NewReader(resp.Body)}, resp.StatusCode
}

// event is one SSE message: comment lines or fields.
type event struct {
	comment string
	id      string
	data    string
}

func (s *stream) next(t *testing.T) event {
	t.Helper()
	var ev event
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			ev.data = strings.Join(data, "\n")
			return ev
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:])
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

func TestEventsArriveAndEnd(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	src := smallCluster()
	s := startLive(t, src, withKeyRequired(false))

	st, status := openStream(t, s.addr, "overview", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if ev := st.next(t); ev.comment != "connected" {
		t.Fatalf("first event %+v, want the connected comment", ev)
	}

	s.clock.Advance(s.c.cfg.Interval)
	ev := st.next(t)
	if ev.id != "1" || !strings.Contains(ev.data, `id="totals"`) || !strings.Contains(ev.data, "NVIDIA GeForce RTX 4090") {
		t.Fatalf("first update %+v", ev)
	}

	// An unchanged page is not sent again; a change is.
	src.update(func(f *fakeSources) { f.engines[0].Running = 42 })
	s.clock.Advance(s.c.cfg.Interval)
	ev = st.next(t)
	if ev.id != "2" || !strings.Contains(ev.data, "<dd>42</dd>") {
		t.Fatalf("second update %+v", ev)
	}

	// Stopping the hub ends the stream.
	s.stop(t)
	if _, err := st.r.ReadString('\n'); err == nil {
		t.Error("stream still open after the hub stopped")
	}
	st.conn.Close()
}

func TestEventsHeartbeat(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	s := startLive(t, nil, withKeyRequired(false))
	defer s.stop(t)
	st, _ := openStream(t, s.addr, "requests", nil)
	defer st.conn.Close()
	st.next(t) // connected

	s.clock.Advance(s.c.cfg.Heartbeat)
	for {
		ev := st.next(t)
		if ev.comment == "ping" {
			return
		}
		if ev.id == "" {
			t.Fatalf("unexpected event %+v", ev)
		}
		// The tick that fell due with the heartbeat may come first.
	}
}

func TestEventsEndWhenBrowserGoes(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	s := startLive(t, nil, withKeyRequired(false))
	defer s.stop(t)
	st, _ := openStream(t, s.addr, "sessions", nil)
	st.next(t)
	if n := s.c.hub.Stats().Subscribers; n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
	st.conn.Close()

	// The server notices on a failed write; heartbeats make writes happen.
	// The first write after the peer closed may still succeed, so keep
	// beating until the subscription ends.
	deadline := time.After(20 * time.Second)
	for {
		s.clock.Advance(s.c.cfg.Heartbeat)
		select {
		case <-s.c.hub.unsubscribed:
			if n := s.c.hub.Stats().Subscribers; n != 0 {
				t.Fatalf("%d subscribers after the browser left", n)
			}
			return
		case <-deadline:
			t.Fatal("stream did not end after the browser went away")
		case <-time.After(5 * time.Millisecond):
			// Pace the heartbeats; the loop ends on the channel above.
		}
	}
}

// A browser that keeps its connection open but stops reading must not pin
// the stream's goroutine once the socket buffers are full.
func TestEventsEndWhenBrowserStopsReading(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	s := startLive(t, nil, withKeyRequired(false), withConfig(func(c *Config) { c.WriteTimeout = 200 * time.Millisecond }))
	defer s.stop(t)
	st, _ := openStream(t, s.addr, "overview", nil)
	defer st.conn.Close()
	st.conn.(*net.TCPConn).SetReadBuffer(4096)
	st.next(t) // connected; from here on the client reads nothing

	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		// Distinct large pages, so that none is skipped as unchanged.
		s.c.hub.Publish(TopicOverview, bytes.Repeat([]byte{byte('a' + i%26)}, 1<<20))
		select {
		case <-s.c.hub.unsubscribed:
			if st := s.c.hub.Stats(); st.Subscribers != 0 {
				t.Errorf("stats %+v: want no subscriber left", st)
			}
			return
		case <-deadline:
			t.Fatal("stream still open with a browser that stopped reading")
		case <-time.After(20 * time.Millisecond):
			// Pace the publishing; the loop ends on the channel above.
		}
	}
}

func TestEventsRefused(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	s := startLive(t, nil, withKeyRequired(false), withConfig(func(c *Config) { c.MaxSubscribers = 1 }))
	defer s.stop(t)

	if _, status := openStream(t, s.addr, "nonsense", nil); status != http.StatusNotFound {
		t.Errorf("unknown topic: status %d, want 404", status)
	}
	st, _ := openStream(t, s.addr, "overview", nil)
	defer st.conn.Close()
	st.next(t)
	if _, status := openStream(t, s.addr, "overview", nil); status != http.StatusServiceUnavailable {
		t.Errorf("over the limit: status %d, want 503", status)
	}
	// htmx swaps error pages in; it gets No Content and keeps the page.
	resp, _ := s.do(t, request{path: "/console/events/overview", header: map[string]string{"HX-Request": "true"}})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("over the limit, from htmx: status %d, want 204", resp.StatusCode)
	}
}

func TestEventsNeedLogin(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	s := startLive(t, nil, withKeyRequired(true))
	defer s.stop(t)
	if _, status := openStream(t, s.addr, "overview", nil); status != http.StatusUnauthorized {
		t.Fatalf("status %d without a login, want 401", status)
	}
	_, secret, err := s.store.CreateKey(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	token := s.c.logins.create(mustCheck(t, s.store, secret).ID)
	st, status := openStream(t, s.addr, "overview", &http.Cookie{Name: cookieName, Value: token})
	if status != http.StatusOK {
		t.Fatalf("status %d with a login, want 200", status)
	}
	st.conn.Close()
}

func mustCheck(t *testing.T, store *MemoryStore, secret string) apikey.Key {
	t.Helper()
	k, err := store.CheckKey(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestHubDropsForSlowSubscriber(t *testing.T) {
	h := newHub(Config{Interval: time.Second, Heartbeat: time.Minute, SubscriberBuffer: 3, MaxSubscribers: 4},
		newFakeClock(t0), nil)
	slow, err := h.Subscribe(TopicOverview)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.Subscribe(TopicOverview)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var fastGot []string
	for i := range n {
		h.Publish(TopicOverview, []byte(fmt.Sprintf("<p>%d</p>", i)))
		fastGot = append(fastGot, messageDataString(<-fast.Frames()))
	}
	if got := slow.Dropped(); got != n-3 {
		t.Errorf("slow subscriber dropped %d, want %d", got, n-3)
	}
	if got := fast.Dropped(); got != 0 {
		t.Errorf("fast subscriber dropped %d, want 0", got)
	}
	st := h.Stats()
	if st.Dropped != n-3 || st.Published != 2*n || st.Delivered != n+3 || st.Subscribers != 2 {
		t.Errorf("stats %+v", st)
	}
	// The slow one keeps the oldest updates it had room for.
	for i := range 3 {
		if got, want := messageDataString(<-slow.Frames()), fmt.Sprintf("<p>%d</p>", i); got != want {
			t.Errorf("slow frame %d = %q, want %q", i, got, want)
		}
	}
	if fastGot[n-1] != "<p>9</p>" {
		t.Errorf("fast subscriber's last frame %q", fastGot[n-1])
	}
	slow.Close()
	slow.Close() // twice is harmless
	if _, ok := <-slow.Frames(); ok {
		t.Error("frames still open after Close")
	}
	fast.Close()
	if h.Stats().Subscribers != 0 {
		t.Error("subscribers left")
	}
}

func TestHubNewSubscriberGetsLatest(t *testing.T) {
	h := newHub(Config{SubscriberBuffer: 2, MaxSubscribers: 4}, newFakeClock(t0), nil)
	first, _ := h.Subscribe(TopicRequests)
	h.Publish(TopicRequests, []byte("a"))
	<-first.Frames()
	second, _ := h.Subscribe(TopicRequests)
	if got := messageDataString(<-second.Frames()); got != "a" {
		t.Errorf("new subscriber got %q, want the latest frame", got)
	}
	first.Close()
	second.Close()
	// Nobody watched in between: a stale frame must not be replayed.
	third, _ := h.Subscribe(TopicRequests)
	select {
	case f := <-third.Frames():
		t.Errorf("stale frame %q replayed", f)
	default:
	}
	third.Close()
}

func messageDataString(frame []byte) string { return string(messageData(frame)) }

func TestEncodeEvent(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"one line", "<p>x</p>", "id: 7\ndata: <p>x</p>\n\n"},
		{"empty", "", "id: 7\ndata: \n\n"},
		{"LF", "a\nb", "id: 7\ndata: a\ndata: b\n\n"},
		{"CRLF", "a\r\nb", "id: 7\ndata: a\ndata: b\n\n"},
		{"lone CR", "a\rb", "id: 7\ndata: a\ndata: b\n\n"},
		{"trailing LF", "a\n", "id: 7\ndata: a\ndata: \n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(encodeEvent(7, []byte(tc.in))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzEncodeEvent checks that any fragment survives SSE framing: parsed
// the way a browser parses it, the data equals the fragment with its line
// breaks turned into LFs.
func FuzzEncodeEvent(f *testing.F) {
	for _, s := range []string{"", "<p>x</p>", "a\r\nb\rc\nd", "data: x\n\nid: 3", "\r\n\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fragment string) {
		frame := string(encodeEvent(1, []byte(fragment)))
		if !strings.HasSuffix(frame, "\n\n") {
			t.Fatalf("frame does not end the message: %q", frame)
		}
		var data []string
		lines := strings.Split(strings.TrimSuffix(frame, "\n\n"), "\n")
		for _, l := range lines[1:] {
			if strings.ContainsRune(l, '\r') {
				t.Fatalf("CR inside a line: %q", l)
			}
			v, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				t.Fatalf("line %q is not a data line", l)
			}
			data = append(data, v)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(fragment, "\r\n", "\n"), "\r", "\n")
		if got := strings.Join(data, "\n"); got != want {
			t.Fatalf("data %q, want %q", got, want)
		}
	})
}

// messageData returns the data of a frame made by encodeEvent, its data
// lines joined with LFs.
func messageData(frame []byte) []byte {
	_, rest, _ := bytes.Cut(frame, []byte("\ndata: "))
	rest = bytes.TrimSuffix(rest, []byte("\n\n"))
	return bytes.ReplaceAll(rest, []byte("\ndata: "), []byte("\n"))
}
