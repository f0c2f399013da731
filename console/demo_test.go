package console

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

var (
	demoAddr = flag.String("demo", "", "serve the console with fake data on this address (e.g. 127.0.0.1:8199), for looking at it in a browser")
	demoFor  = flag.Duration("demo.for", 2*time.Minute, "how long -demo serves")
)

// TestDemo serves the console over a fake, changing cluster. It is a tool
// for looking at the pages in a real browser, not a check:
//
//	go test ./console -run TestDemo -demo 127.0.0.1:8199 -demo.for 10m
func TestDemo(t *testing.T) {
	if *demoAddr == "" {
		t.Skip("set -demo ADDR to serve the console with fake data")
	}
	src := loadedSources(time.Now(), 3, 24, 300)
	store := NewMemoryStore(Settings{
		Policy: "kv", Policies: []string{"round_robin", "random", "least_loaded", "kv", "hearth"},
		Models: []string{"qwen3-14b"}, Aliases: []Alias{{From: "claude-*", To: "qwen3-14b"}},
	}, nil)
	c, err := New(Config{Interval: time.Second, ChartWindow: 2 * time.Minute}, Deps{
		Engines: src, Router: src, Traffic: src, KVStores: src, Keys: store, Settings: store,
		KeyRequired: func(context.Context) bool { return false },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	c.Register(app)
	ln, err := net.Listen("tcp", *demoAddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), *demoFor)
	defer cancel()
	go c.Run(ctx)
	go app.Listener(ln)
	defer app.Shutdown()

	rng := rand.New(rand.NewPCG(3, 4))
	stats := time.NewTicker(5 * time.Second)
	defer stats.Stop()
	t.Logf("console on http://%s/console/", ln.Addr())
	for {
		select {
		case <-ctx.Done():
			return
		case <-stats.C:
			t.Logf("hub: %+v", c.Hub().Stats())
			continue
		case <-time.After(500 * time.Millisecond):
		}
		src.update(func(f *fakeSources) {
			for i := range f.engines {
				e := &f.engines[i]
				q := int64(2000 + rng.IntN(6000))
				e.PrefixQueries += q
				e.PrefixHits += q * int64(55+10*i+rng.IntN(25)) / 100
				e.GenerationTokens += int64(40 + rng.IntN(60))
				if e.RAMTotalBlocks > 0 {
					e.RAMHitTokens += q * int64(rng.IntN(15)) / 100
				}
				e.DiskHitTokens += q * int64(rng.IntN(10)) / 100
				e.LoadedBytes += int64(rng.IntN(400)) << 20
				e.StoredBytes += int64(rng.IntN(300)) << 20
				e.UsedBlocks = min(e.TotalBlocks/2, max(0, e.UsedBlocks+rng.IntN(101)-50))
				e.CachedFreeBlocks = min(e.TotalBlocks-e.UsedBlocks, max(0, e.CachedFreeBlocks+rng.IntN(61)-30))
				// GPU telemetry wanders, and the last GPU drops off the bus
				// for ten seconds a minute, as after a driver reset.
				e.UtilizationPct = min(100, max(0, e.UtilizationPct+rng.IntN(21)-10))
				e.TemperatureC = min(90, max(35, e.TemperatureC+rng.IntN(5)-2))
				e.PowerDrawW = min(e.PowerLimitW, max(60, e.PowerDrawW+float64(rng.IntN(61)-30)))
				if i == len(f.engines)-1 {
					e.GPULost = time.Now().Second() >= 50
					e.GPUErr = ""
					if e.GPULost {
						e.GPUErr = "nvml: GPU is lost (ERROR_GPU_IS_LOST)"
					}
				}
			}
			for i := range f.stores {
				st := &f.stores[i]
				st.Hits += int64(rng.IntN(80))
				st.Misses += int64(rng.IntN(40))
				st.EvictedBlocks += int64(rng.IntN(5))
				st.ReadBytes += int64(rng.IntN(200)) << 20
				st.WrittenBytes += int64(rng.IntN(300)) << 20
			}
			now := time.Now()
			for i := range f.decisions {
				f.decisions[i].At = now.Add(-time.Duration(i) * 300 * time.Millisecond)
				f.decisions[i].RequestID = f.decisions[i].RequestID[:10] + "-" + now.Format("150405.0")
			}
			// One session keeps working: a turn a second, now and then
			// with a rewritten prompt.
			s := &f.sessions[0]
			last := s.Turns[len(s.Turns)-1]
			turn := Turn{At: now, Kind: TurnKindTurn, PromptTokens: last.PromptTokens + 700, CachedTokens: last.PromptTokens / 16 * 16, OutputTokens: 300}
			if len(s.Turns)%5 == 0 {
				turn.CachedTokens, turn.Diverged, turn.DivergedBlock, turn.Cause = 64, true, 4, "evicted"
			}
			if now.Sub(last.At) > time.Second {
				s.Turns = append(s.Turns, turn)
				s.LastActive = now
			}
			for i := range f.requests {
				f.requests[i].At = now.Add(-time.Duration(i) * time.Second)
			}
		})
	}
}
