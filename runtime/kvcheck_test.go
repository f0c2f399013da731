package runtime_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
	"github.com/hearth-llm/hearth/zmtp"
)

// zmtpStream is an engine's KV events over one ZMTP subscription, as
// the daemon's tap (router/ingest.DialTap) reads them.
type zmtpStream struct{ conn *zmtp.Conn }

func dialStream(ctx context.Context, endpoint, topic string) (hruntime.KVEventStream, error) {
	conn, err := zmtp.Dial(ctx, endpoint, zmq4.Sub)
	if err != nil {
		return nil, err
	}
	if err := conn.Send(append([]byte{1}, topic...)); err != nil {
		conn.Close()
		return nil, err
	}
	return zmtpStream{conn}, nil
}

func (s zmtpStream) Next() ([]byte, error) {
	frames, err := s.conn.Recv()
	if err != nil {
		return nil, err
	}
	_, payload, err := kvevents.ParseMessage(frames)
	return payload, err
}

func (s zmtpStream) Close() error { return s.conn.Close() }

// TestCheckKVEvents: the KV-event self-check against both simulated kinds,
// publishing as their pinned release does and playing each fault: every
// probe block matches when nothing is wrong; a parent hash under another
// seed breaks the chain at the first block stored with a parent (vLLM
// stores a request's new blocks in one event, so where the second
// request's begin; SGLang one page an event, so at the second page); an
// unknown field order and no events at all match none, and each says why.
func TestCheckKVEvents(t *testing.T) {
	tok := qwen3(t)
	cases := []struct {
		fault       string
		state       hruntime.KVEventsState
		matched     int
		firstDiff   int
		causePhrase string
	}{
		{"", hruntime.KVEventsMatch, hruntime.KVProbeBlocks, -1, ""},
		{hruntime.SimKVEventsWrongHashSeed, hruntime.KVEventsDiffer, -1, -1, "hash chain Hearth cannot follow"}, // per kind, below
		{hruntime.SimKVEventsUnknownLayout, hruntime.KVEventsDiffer, 0, 0, "field order Hearth does not know"},
		{hruntime.SimKVEventsNone, hruntime.KVEventsDiffer, 0, 0, "no KV events arrived"},
	}
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		for _, tc := range cases {
			name := tc.fault
			if name == "" {
				name = "good"
			}
			if tc.fault == hruntime.SimKVEventsWrongHashSeed {
				tc.matched = firstParented(kind)
				tc.firstDiff = tc.matched
			}
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				inst, err := sim.NewInstance(sim.InstanceOptions{
					Engine:   sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 256, MaxModelLen: 2048, Kind: kind},
					Listen:   "127.0.0.1:0",
					KVEvents: "tcp://127.0.0.1:0", Topic: hruntime.KVEventsTopic,
					Speedup: 1000, Tokenizer: tok, KVEventFault: tc.fault,
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				ran := make(chan error, 1)
				go func() { ran <- inst.Run(ctx) }()
				t.Cleanup(func() {
					cancel()
					if err := <-ran; err != nil {
						t.Errorf("instance: %v", err)
					}
				})
				if err := hruntime.WaitReady(t.Context(), http.DefaultClient, inst.BaseURL(), "qwen3-8b", nil); err != nil {
					t.Fatal(err)
				}
				stream, err := dialStream(t.Context(), inst.KVEventsEndpoint(), hruntime.KVEventsTopic)
				if err != nil {
					t.Fatal(err)
				}
				// A wait that only the fault of no events uses up in full.
				c := hruntime.CheckKVEvents(t.Context(), http.DefaultClient, hruntime.KVProbe{
					BaseURL: inst.BaseURL(), Model: "qwen3-8b", Events: stream, Format: inst.EventFormat(),
					Tokens:    hruntime.KVProbeTokens(tok, t.Name(), hruntime.KVProbeBlocks, tokenizer.DefaultBlockSize),
					BlockSize: tokenizer.DefaultBlockSize, Split: hruntime.KVProbeSplit, Wait: 2 * time.Second,
				})
				if c.State != tc.state || c.Matched != tc.matched || c.Blocks != hruntime.KVProbeBlocks || c.FirstDifference != tc.firstDiff ||
					!strings.Contains(c.Cause, tc.causePhrase) {
					t.Fatalf("check %+v (%s), want %s with %d matched, first difference %d, cause saying %q",
						c, c, tc.state, tc.matched, tc.firstDiff, tc.causePhrase)
				}
				if tc.state == hruntime.KVEventsDiffer {
					want := "KV events: " + strconv.Itoa(tc.matched) + " of 12 probe blocks matched; first difference at block " + strconv.Itoa(tc.firstDiff) + ": "
					if !strings.HasPrefix(c.String(), want) {
						t.Errorf("summary %q, want it to begin %q", c.String(), want)
					}
				}
			})
		}
	}
}

// firstParented is the first probe block a simulated engine of kind
// stores in an event with a parent: vLLM's events store a request's new
// blocks together, SGLang's one page each.
func firstParented(kind hruntime.Kind) int {
	if kind == hruntime.KindSGLang {
		return 1
	}
	return hruntime.KVProbeSplit
}
