package console

import (
	"bufio"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// handleEvents streams one live page. The stream writer runs on fasthttp's
// goroutine after this handler returns; it ends when the hub closes the
// subscription or when a write fails because the browser went away (the
// heartbeat makes sure a write happens every Config.Heartbeat).
//
// A browser can also keep its connection open and stop reading (a tab
// navigated away without closing the socket). Then the socket buffers fill,
// the server's write blocks, and so would this writer, for ever. Every
// write therefore gets a deadline on the connection: a frame not taken by
// the network within Config.WriteTimeout fails the write and ends the
// stream. (The hub is unaffected either way: it drops what does not fit.)
func (c *Console) handleEvents(fc *fiber.Ctx) error {
	// The hub keeps the topic as a map key: copy it out of fasthttp's
	// request buffer, which the next request on the connection reuses.
	sub, err := c.hub.Subscribe(Topic(strings.Clone(fc.Params("topic"))))
	switch {
	case errors.Is(err, ErrUnknownTopic):
		return plainError(fc, fiber.StatusNotFound, "no such live page")
	case err != nil && fc.Get("HX-Request") == "true":
		// htmx would swap an error page over the rendered one; with No
		// Content the page stays, just not live.
		return fc.SendStatus(fiber.StatusNoContent)
	case err != nil:
		fc.Set(fiber.HeaderRetryAfter, "5")
		return plainError(fc, fiber.StatusServiceUnavailable, err.Error())
	}
	fc.Set(fiber.HeaderContentType, "text/event-stream")
	fc.Set(fiber.HeaderCacheControl, "no-store")
	fc.Set("X-Accel-Buffering", "no")
	conn := fc.Context().Conn()
	timeout := c.cfg.WriteTimeout
	fc.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer sub.Close()
		// The connection may serve another request after this stream.
		defer conn.SetWriteDeadline(time.Time{})
		send := func(b []byte) bool {
			// The deadline is on the network, so real time, not the clock.
			if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
				return false
			}
			if _, err := w.Write(b); err != nil {
				return false
			}
			return w.Flush() == nil
		}
		// Send something at once so the browser sees the stream open.
		if !send(connected) {
			return
		}
		for frame := range sub.Frames() {
			if !send(frame) {
				return
			}
		}
	})
	return nil
}

var connected = []byte(": connected\n\n")
