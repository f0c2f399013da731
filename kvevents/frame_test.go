package kvevents

import (
	"bytes"
	"errors"
	"testing"
)

func TestFrames(t *testing.T) {
	payload := []byte{0x92, 0x00, 0x90}

	msg := Message([]byte("kv-events"), 258, payload)
	if len(msg) != 3 || string(msg[0]) != "kv-events" || !bytes.Equal(msg[1], []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Errorf("Message = %x", msg)
	}
	if seq, p, err := ParseMessage(msg); err != nil || seq != 258 || !bytes.Equal(p, payload) {
		t.Errorf("ParseMessage = %d, %x, %v", seq, p, err)
	}

	req := ReplayRequest(7)
	if len(req) != 2 || len(req[0]) != 0 || !bytes.Equal(req[1], []byte{0, 0, 0, 0, 0, 0, 0, 7}) {
		t.Errorf("ReplayRequest = %x", req)
	}
	// The ROUTER sees the requester's identity in front.
	id, from, err := ParseReplayRequest(append([][]byte{[]byte("peer")}, req...))
	if err != nil || string(id) != "peer" || from != 7 {
		t.Errorf("ParseReplayRequest = %q, %d, %v", id, from, err)
	}

	// The DEALER sees the ROUTER's frames without the identity.
	reply := ReplayReply([]byte("peer"), 9, payload)
	if string(reply[0]) != "peer" {
		t.Errorf("ReplayReply = %x", reply)
	}
	if seq, p, end, err := ParseReplayReply(reply[1:]); err != nil || seq != 9 || end || !bytes.Equal(p, payload) {
		t.Errorf("ParseReplayReply(reply) = %d, %x, %v, %v", seq, p, end, err)
	}
	withTopic := [][]byte{{}, []byte("kv-events"), AppendSeq(nil, 9), payload}
	if seq, p, end, err := ParseReplayReply(withTopic); err != nil || seq != 9 || end || !bytes.Equal(p, payload) {
		t.Errorf("ParseReplayReply(with topic) = %d, %x, %v, %v", seq, p, end, err)
	}

	endReply := ReplayEndReply([]byte("peer"))
	if !bytes.Equal(endReply[2], bytes.Repeat([]byte{0xff}, 8)) || len(endReply[3]) != 0 {
		t.Errorf("ReplayEndReply = %x, want 8×0xFF and an empty payload", endReply)
	}
	if seq, p, end, err := ParseReplayReply(endReply[1:]); err != nil || seq != ReplayEnd || !end || p != nil {
		t.Errorf("ParseReplayReply(end) = %d, %x, %v, %v", seq, p, end, err)
	}
}

func TestFramesMalformed(t *testing.T) {
	seq := AppendSeq(nil, 1)
	if _, _, err := ParseMessage([][]byte{[]byte("t"), seq}); !errors.Is(err, ErrMalformed) {
		t.Errorf("two-frame message: %v", err)
	}
	if _, _, err := ParseMessage([][]byte{[]byte("t"), seq[:7], nil}); !errors.Is(err, ErrMalformed) {
		t.Errorf("7-byte seq: %v", err)
	}
	if _, _, err := ParseReplayRequest([][]byte{[]byte("id"), []byte("x"), seq}); !errors.Is(err, ErrMalformed) {
		t.Errorf("request without the empty delimiter: %v", err)
	}
	if _, _, err := ParseReplayRequest([][]byte{[]byte("id"), {}, seq[:4]}); !errors.Is(err, ErrMalformed) {
		t.Errorf("request with a short seq: %v", err)
	}
	if _, _, _, err := ParseReplayReply([][]byte{{}, seq}); !errors.Is(err, ErrMalformed) {
		t.Errorf("reply without payload: %v", err)
	}
	if _, _, _, err := ParseReplayReply([][]byte{{}, {1, 2}, nil}); !errors.Is(err, ErrMalformed) {
		t.Errorf("reply with a short seq: %v", err)
	}
}
