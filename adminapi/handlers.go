package adminapi

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Mount adds the API's routes to r, each behind guard.
func Mount(r fiber.Router, guard fiber.Handler, src Sources) {
	mount(r, guard, src, logStream{heartbeat: 15 * time.Second, writeTimeout: 10 * time.Second})
}

func mount(r fiber.Router, guard fiber.Handler, src Sources, logs logStream) {
	engines := src.Engines
	r.Get("/api/v1/engines", guard, func(c *fiber.Ctx) error {
		return c.JSON(EngineList{Engines: nonNil(engines.Engines())})
	})
	r.Get("/api/v1/engines/:name/logs", guard, func(c *fiber.Ctx) error { return logs.serve(c, engines) })
	r.Get("/api/v1/sessions", guard, func(c *fiber.Ctx) error {
		return c.JSON(SessionList{Sessions: nonNil(src.Sessions.Sessions())})
	})
	mountCluster(r, guard, src.Cluster)
	mountDrain(r, guard, src.Drain)
	mountModels(r, guard, src.Models)
}

func mountDrain(r fiber.Router, guard fiber.Handler, d Drain) {
	noDrain := func() error { return fiber.NewError(fiber.StatusNotFound, "this daemon cannot be drained") }
	r.Get("/api/v1/node", guard, func(c *fiber.Ctx) error {
		if d == nil {
			return noDrain()
		}
		return c.JSON(d.Drain())
	})
	r.Post("/api/v1/node/drain", guard, func(c *fiber.Ctx) error {
		if d == nil {
			return noDrain()
		}
		return c.JSON(d.SetManual(true))
	})
	r.Post("/api/v1/node/undrain", guard, func(c *fiber.Ctx) error {
		if d == nil {
			return noDrain()
		}
		return c.JSON(d.SetManual(false))
	})
}

// notOnDemand answers a models operation on a daemon whose every model
// has GPUs of its own.
var notOnDemand = fiber.NewError(fiber.StatusConflict, "every model has GPUs of its own: models load on demand only when hearth up serves more --model than its GPUs hold")

func mountModels(r fiber.Router, guard fiber.Handler, ms Models) {
	r.Get("/api/v1/models", guard, func(c *fiber.Ctx) error {
		var list []Model
		if ms != nil {
			list = ms.Models()
		}
		return c.JSON(ModelList{Models: nonNil(list)})
	})
	r.Post("/api/v1/models/:name/:action", guard, func(c *fiber.Ctx) error {
		if ms == nil {
			return notOnDemand
		}
		name, action := c.Params("name"), c.Params("action")
		if n, err := url.PathUnescape(name); err == nil {
			name = n
		}
		var err error
		switch action {
		case "load":
			err = ms.Load(c.UserContext(), name)
		case "unload":
			err = ms.Unload(c.UserContext(), name)
		case "pin", "unpin":
			err = ms.Pin(name, action == "pin")
		default:
			return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("no model action %q: want load, unload, pin or unpin", action))
		}
		if err != nil {
			return statusError(err, fiber.StatusInternalServerError)
		}
		return c.JSON(Outcome{Model: name, Action: action})
	})
}

// noCluster answers an operation on a node that belongs to no cluster.
var noCluster = fiber.NewError(fiber.StatusConflict, "this node belongs to no cluster")

func mountCluster(r fiber.Router, guard fiber.Handler, cl Cluster) {
	r.Get("/api/v1/nodes", guard, func(c *fiber.Ctx) error {
		if cl == nil {
			return c.JSON(NodeList{Nodes: []Node{}})
		}
		list := cl.Nodes()
		list.Nodes = nonNil(list.Nodes)
		for i := range list.Nodes {
			n := &list.Nodes[i]
			n.GPUs, n.Engines = nonNil(n.GPUs), nonNil(n.Engines)
		}
		return c.JSON(list)
	})
	r.Post("/api/v1/nodes/:id/revoke", guard, func(c *fiber.Ctx) error {
		if cl == nil {
			return noCluster
		}
		id := c.Params("id")
		// A node this one cannot revoke is, as far as it knows, not there.
		if err := cl.Revoke(id); err != nil {
			return statusError(err, fiber.StatusNotFound)
		}
		return c.JSON(Outcome{Revoked: id})
	})
	r.Get("/api/v1/cluster/join-requests", guard, func(c *fiber.Ctx) error {
		if cl == nil {
			return c.JSON(JoinRequestList{Requests: []JoinRequest{}})
		}
		list := cl.JoinRequests()
		list.Requests = nonNil(list.Requests)
		return c.JSON(list)
	})
	decide := func(f func(id string) error, outcome func(id string) Outcome) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if cl == nil {
				return noCluster
			}
			id := c.Params("id")
			if err := f(id); err != nil {
				return statusError(err, fiber.StatusInternalServerError)
			}
			return c.JSON(outcome(id))
		}
	}
	r.Post("/api/v1/cluster/join-requests/:id/accept", guard, decide(
		func(id string) error { return cl.AcceptJoin(id) }, func(id string) Outcome { return Outcome{Accepted: id} }))
	r.Post("/api/v1/cluster/join-requests/:id/reject", guard, decide(
		func(id string) error { return cl.RejectJoin(id) }, func(id string) Outcome { return Outcome{Rejected: id} }))
	r.Post("/api/v1/cluster/leave", guard, func(c *fiber.Ctx) error {
		if cl == nil {
			return noCluster
		}
		id, warning, err := cl.Leave()
		if err != nil {
			return statusError(err, fiber.StatusInternalServerError)
		}
		out := Outcome{Left: id}
		if warning != nil {
			out.Warning = warning.Error()
		}
		return c.JSON(out)
	})
}

// statusError is the API's answer to a source's error: the status its
// mark names, else otherwise.
func statusError(err error, otherwise int) error {
	status := otherwise
	switch {
	case errors.Is(err, ErrNotFound):
		status = fiber.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = fiber.StatusConflict
	}
	return fiber.NewError(status, err.Error())
}

// nonNil makes a nil list an empty one: the API's lists are never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// logStream serves GET /api/v1/engines/:name/logs: the engine's last
// output lines, as text. With ?follow=1 it sends them and then every new
// line as it comes, as server-sent events: a "data:" field per line, an
// "event: restart" when the engine is launched again (its new run's lines
// follow), and a comment every heartbeat. The stream ends when the client
// goes (a write fails: the heartbeat makes sure one is tried) or the
// server stops.
type logStream struct {
	heartbeat    time.Duration
	writeTimeout time.Duration // a client that stops reading is dropped after it
}

func (h logStream) serve(c *fiber.Ctx, engines Engines) error {
	// The name outlives the handler in a followed stream: copy it out of
	// fasthttp's request buffer, which the next request reuses.
	name := strings.Clone(c.Params("name"))
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	notFound := func() error {
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": fmt.Sprintf("no engine named %q", name)})
	}
	if !c.QueryBool("follow") {
		lines, ok := engines.Logs(name)
		if !ok {
			return notFound()
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		if len(lines) == 0 {
			return c.SendString("")
		}
		return c.SendString(strings.Join(lines, "\n") + "\n")
	}
	page, ok := engines.FollowLogs(name)
	if !ok {
		return notFound()
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no")
	conn := c.Context().Conn()
	shutdown := c.Context().Done() // closed when the server stops serving
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer conn.SetWriteDeadline(time.Time{})
		send := func(b []byte) bool {
			// The deadline is on the network, so real time.
			if err := conn.SetWriteDeadline(time.Now().Add(h.writeTimeout)); err != nil {
				return false
			}
			if _, err := w.Write(b); err != nil {
				return false
			}
			return w.Flush() == nil
		}
		beat := time.NewTicker(h.heartbeat)
		defer beat.Stop()
		var buf []byte
		for first := true; ; first = false {
			buf = buf[:0]
			if page.NewRun {
				buf = append(buf, "event: restart\ndata: \n\n"...)
			}
			for _, l := range page.Lines { // log lines hold no line breaks
				buf = append(buf, "data: "...)
				buf = append(buf, l...)
				buf = append(buf, "\n\n"...)
			}
			if first && len(buf) == 0 {
				buf = append(buf, ": following\n\n"...) // the client sees the stream open
			}
			if len(buf) > 0 && !send(buf) {
				return
			}
		wait:
			for {
				select {
				case <-page.More: // nil when the runtime cannot tell: never
					break wait
				case <-page.Relaunched:
					break wait
				case <-shutdown:
					return
				case <-beat.C:
					if !send(heartbeatComment) {
						return
					}
				}
			}
			page = page.Next()
		}
	})
	return nil
}

var heartbeatComment = []byte(": heartbeat\n\n")
