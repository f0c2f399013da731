package sim

import (
	"context"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
)

// benchEvents is one busy step's events: a 64-block prefill stored and 32
// evicted blocks removed.
func benchEvents() []kvevents.Event {
	stored := kvevents.Event{Kind: kvevents.BlockStored, BlockSize: 16, HasParent: true, ParentBlockHash: 1 << 63}
	for i := range 64 {
		stored.BlockHashes = append(stored.BlockHashes, uint64(i)*0x9e3779b97f4a7c15)
		for j := range 16 {
			stored.TokenIDs = append(stored.TokenIDs, uint32(i*16+j)*7919%151000)
		}
	}
	removed := kvevents.Event{Kind: kvevents.BlockRemoved}
	for i := range 32 {
		removed.BlockHashes = append(removed.BlockHashes, uint64(i)*0xbf58476d1ce4e5b9)
	}
	return []kvevents.Event{stored, removed}
}

// BenchmarkPublishKVEvents is the engine loop's cost per step with events:
// encode, number, keep for replay, queue.
func BenchmarkPublishKVEvents(b *testing.B) {
	p, err := NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0", QueueSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer closeForBench(p)
	events := benchEvents()
	b.ReportAllocs()
	for b.Loop() {
		p.PublishKVEvents(0, events)
	}
}

func closeForBench(p *Publisher) {
	ctx, cancel := contextCancelled()
	defer cancel()
	_ = p.Run(ctx)
}

func contextCancelled() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx, cancel
}
