package ingest

import (
	"context"
	"fmt"

	"github.com/go-zeromq/zmq4"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/zmtp"
)

// Tap is one subscription to an engine's KV-event publisher that hands
// over each message's payload as it is, undecoded and without the
// ingest's bookkeeping: for a reader that judges the events itself (the
// start-up KV-event self-check, runtime.CheckKVEvents). It does not
// reconnect.
type Tap struct {
	conn *zmtp.Conn
}

// DialTap connects to endpoint and subscribes to topic. The subscription
// reaches the publisher a moment after DialTap returns (ZMQ's PUB applies
// it on its own time); messages published before then are not seen.
func DialTap(ctx context.Context, endpoint, topic string) (*Tap, error) {
	conn, err := zmtp.Dial(ctx, endpoint, zmq4.Sub)
	if err != nil {
		return nil, fmt.Errorf("kv events tap: %w", err)
	}
	// A ZMTP 3.0 subscription is a message: 1, then the topic.
	if err := conn.Send(append([]byte{1}, topic...)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("kv events tap: subscribe: %w", err)
	}
	return &Tap{conn: conn}, nil
}

// Next returns the next message's payload, valid until the next call. A
// message that is not a KV-event message (kvevents.ParseMessage) is an
// error; so is a closed tap.
func (t *Tap) Next() ([]byte, error) {
	frames, err := t.conn.Recv()
	if err != nil {
		return nil, fmt.Errorf("kv events tap: %w", err)
	}
	_, payload, err := kvevents.ParseMessage(frames)
	if err != nil {
		return nil, fmt.Errorf("kv events tap: %w", err)
	}
	return payload, nil
}

// Close ends the subscription; a Next waiting on another goroutine
// returns an error. Safe to call more than once.
func (t *Tap) Close() error { return t.conn.Close() }
