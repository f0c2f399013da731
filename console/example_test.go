package console_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/console"
)

// routerAdapter shows the shape of an adapter the daemon writes: it turns
// the router's decisions into the console's, so console imports no router.
type routerAdapter struct {
	decisions func(n int) []console.Decision // e.g. converting router.Router.Decisions
	queueLen  func() int
}

func (a routerAdapter) Decisions(_ context.Context, n int) ([]console.Decision, error) {
	return a.decisions(n), nil
}

func (a routerAdapter) QueueLen(context.Context) (int, error) { return a.queueLen(), nil }

// Example wires the console into a fiber app the way the daemon does.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	store := console.NewMemoryStore(console.Settings{
		Policy: "kv", Policies: []string{"kv", "hearth"}, Models: []string{"qwen3-14b"},
	}, nil)
	c, err := console.New(console.Config{BasePath: "/console"}, console.Deps{
		Router: routerAdapter{
			decisions: func(int) []console.Decision { return nil },
			queueLen:  func() int { return 0 },
		},
		// Engines and Traffic: adapters over runtime/nodes and the gateway.
		Keys:        store,
		Settings:    store,
		KeyRequired: func(context.Context) bool { return false }, // the API's own rule
		Logger:      slog.Default(),
	})
	if err != nil {
		panic(err)
	}

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	c.Register(app) // before any catch-all handler on app

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(ctx) }) // ends open streams when ctx ends
	_ = g.Wait()
}
