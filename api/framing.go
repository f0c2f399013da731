package api

import (
	"bytes"
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// refuseAmbiguousFraming answers 400 and closes the connection when a
// request's length is framed two ways: Content-Length beside
// Transfer-Encoding, or Content-Lengths that differ. A proxy in front of
// Hearth may read such a request's end elsewhere than Hearth does, and
// the rest of the buffer would then be served as a request nobody sent
// (RFC 9112, section 6.3). The HTTP parser keeps only one of the values,
// so the raw header lines are read here.
func refuseAmbiguousFraming(c *fiber.Ctx) error {
	var contentLength []byte
	lengths, transferEncoding := 0, false
	for line := range bytes.Lines(c.Request().Header.RawHeaders()) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(bytes.TrimSpace(name), []byte(fiber.HeaderContentLength)):
			if lengths > 0 && !bytes.Equal(value, contentLength) {
				return refuseFraming(c, "differing Content-Length headers")
			}
			contentLength = value
			lengths++
		case bytes.EqualFold(bytes.TrimSpace(name), []byte(fiber.HeaderTransferEncoding)):
			transferEncoding = true
		}
	}
	if lengths > 0 && transferEncoding {
		return refuseFraming(c, "both Content-Length and Transfer-Encoding")
	}
	return c.Next()
}

func refuseFraming(c *fiber.Ctx, why string) error {
	c.Context().SetConnectionClose()
	return &apiError{Status: http.StatusBadRequest, Message: "ambiguous request framing: " + why}
}
