package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The ZMQ message shapes. Sockets stay with their users; these functions
// only build and split frames.
//
//	live (PUB → SUB):          [topic, seq, payload]
//	replay request (DEALER):   ["", seq]           the first seq wanted
//	  as the ROUTER sees it:   [identity, "", seq]
//	replay reply (ROUTER):     [identity, "", seq, payload]   per batch
//	  as the DEALER sees it:   ["", seq, payload]
//	end of replay (ROUTER):    [identity, "", ReplayEnd, ""]
//
// seq is 8 bytes, big-endian, counting batches from 0 per engine process.
// vLLM and SGLang send replies without a topic frame; a topic before seq is
// tolerated when reading them.

// SeqSize is the length of a sequence-number frame.
const SeqSize = 8

// ReplayEnd is the sequence number that ends a replay answer: -1 as a
// signed 64-bit integer, eight 0xFF bytes on the wire.
const ReplayEnd uint64 = math.MaxUint64

// AppendSeq appends seq as a sequence-number frame.
func AppendSeq(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, seq)
}

// ParseSeq reads a sequence-number frame.
func ParseSeq(frame []byte) (uint64, error) {
	if len(frame) != SeqSize {
		return 0, fmt.Errorf("%w: sequence frame of %d bytes, want %d", ErrMalformed, len(frame), SeqSize)
	}
	return binary.BigEndian.Uint64(frame), nil
}

// Message returns the frames of one live message. The frames alias topic
// and payload.
func Message(topic []byte, seq uint64, payload []byte) [][]byte {
	return [][]byte{topic, AppendSeq(nil, seq), payload}
}

// ParseMessage splits a live message into its sequence number and payload.
// The payload aliases frames.
func ParseMessage(frames [][]byte) (seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return 0, nil, fmt.Errorf("%w: message of %d frames, want 3", ErrMalformed, len(frames))
	}
	seq, err = ParseSeq(frames[1])
	if err != nil {
		return 0, nil, err
	}
	return seq, frames[2], nil
}

// ReplayRequest returns the frames a DEALER sends to ask for the buffered
// batches from sequence number from on.
func ReplayRequest(from uint64) [][]byte {
	return [][]byte{{}, AppendSeq(nil, from)}
}

// ParseReplayRequest splits a replay request as a ROUTER socket receives
// it. The identity aliases frames.
func ParseReplayRequest(frames [][]byte) (identity []byte, from uint64, err error) {
	if len(frames) != 3 || len(frames[1]) != 0 {
		return nil, 0, fmt.Errorf("%w: replay request of %d frames, want [identity, \"\", seq]", ErrMalformed, len(frames))
	}
	from, err = ParseSeq(frames[2])
	if err != nil {
		return nil, 0, err
	}
	return frames[0], from, nil
}

// ReplayReply returns the frames a ROUTER sends to answer with one batch.
// The frames alias identity and payload.
func ReplayReply(identity []byte, seq uint64, payload []byte) [][]byte {
	return [][]byte{identity, {}, AppendSeq(nil, seq), payload}
}

// ReplayEndReply returns the frames that end a replay answer.
func ReplayEndReply(identity []byte) [][]byte {
	return [][]byte{identity, {}, AppendSeq(nil, ReplayEnd), {}}
}

// ParseReplayReply splits one replay reply as a DEALER socket receives it.
// end reports the end marker, which carries no batch. The payload aliases
// frames.
func ParseReplayReply(frames [][]byte) (seq uint64, payload []byte, end bool, err error) {
	f := frames
	if len(f) > 0 && len(f[0]) == 0 {
		f = f[1:] // the empty delimiter
	}
	if len(f) == 3 {
		f = f[1:] // a topic
	}
	if len(f) != 2 {
		return 0, nil, false, fmt.Errorf("%w: replay reply of %d frames", ErrMalformed, len(frames))
	}
	seq, err = ParseSeq(f[0])
	if err != nil {
		return 0, nil, false, err
	}
	if seq == ReplayEnd {
		return seq, nil, true, nil
	}
	return seq, f[1], false, nil
}
