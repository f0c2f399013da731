package adminapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// TestMountProfilerNeedsACredential: every profile request goes through
// the guard, which decides; other routes do not.
func TestMountProfilerNeedsACredential(t *testing.T) {
	app := fiber.New()
	guarded := 0
	MountProfiler(app, func(c *fiber.Ctx) error {
		guarded++
		if c.Get(LocalTokenHeader) != "right" {
			return fiber.NewError(fiber.StatusForbidden, "wrong local token")
		}
		return c.Next()
	})
	app.Get("/other", func(c *fiber.Ctx) error { return c.SendString("other") })
	for _, tc := range []struct {
		name, path, token string
		want, guarded     int
	}{
		{"no credential", "/debug/pprof/heap", "", http.StatusForbidden, 1},
		{"wrong token", "/debug/pprof/heap", "wrong", http.StatusForbidden, 1},
		{"heap", "/debug/pprof/heap?debug=1", "right", http.StatusOK, 1},
		{"goroutines", "/debug/pprof/goroutine?debug=1", "right", http.StatusOK, 1},
		{"other routes untouched", "/other", "", http.StatusOK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guarded = 0
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.token != "" {
				req.Header.Set(LocalTokenHeader, tc.token)
			}
			resp, err := app.Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want || guarded != tc.guarded {
				t.Fatalf("status %d, guard called %d times, want %d and %d: %.200s", resp.StatusCode, guarded, tc.want, tc.guarded, body)
			}
			if tc.want == http.StatusOK && len(body) == 0 {
				t.Fatal("empty profile")
			}
		})
	}
}
