package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// fakeKeys is a key store whose keys change while the gateway runs, as the
// console's do.
type fakeKeys struct {
	mu      sync.Mutex
	secrets []string
	err     error // returned by HasKeys and CheckKey when set
}

func (k *fakeKeys) set(secrets []string, err error) {
	k.mu.Lock()
	k.secrets, k.err = secrets, err
	k.mu.Unlock()
}

func (k *fakeKeys) HasKeys(context.Context) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.secrets) > 0, k.err
}

func (k *fakeKeys) CheckKey(_ context.Context, secret string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	if slices.Contains(k.secrets, secret) {
		return nil
	}
	return errors.New("no such key")
}

func TestStoredAPIKeys(t *testing.T) {
	keys := &fakeKeys{}
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Keys = keys })
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	for _, tc := range []struct {
		name    string
		stored  []string
		err     error
		headers []string
		status  int
	}{
		{"no key anywhere: open", nil, nil, nil, 200},
		{"no key anywhere: any key passes", nil, nil, bearer("whatever"), 200},
		{"a stored key closes the API", []string{"sk-1"}, nil, nil, 401},
		{"the stored key opens it", []string{"sk-1"}, nil, bearer("sk-1"), 200},
		{"x-api-key works too", []string{"sk-1", "sk-2"}, nil, []string{"x-api-key", "sk-2"}, 200},
		{"a wrong key does not", []string{"sk-1"}, nil, bearer("sk-2"), 401},
		{"revoked: open again", nil, nil, nil, 200},
		{"a failing store keeps the API closed", nil, errors.New("disk gone"), nil, 401},
		{"a failing store accepts no key", []string{"sk-1"}, errors.New("disk gone"), bearer("sk-1"), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys.set(tc.stored, tc.err)
			resp, body := h.post(t, "/v1/chat/completions", chatBody(""), tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if got, want := h.gw.KeyRequired(context.Background()), len(tc.stored) > 0 || tc.err != nil; got != want {
				t.Errorf("KeyRequired = %v, want %v", got, want)
			}
		})
	}
}

func TestStaticAndStoredKeysBothWork(t *testing.T) {
	keys := &fakeKeys{secrets: []string{"sk-stored"}}
	h := startGateway(t, nil, withKeys("sk-static"), func(_ *Config, d *Deps) { d.Keys = keys })
	for _, k := range []string{"sk-static", "sk-stored"} {
		if resp, body := h.post(t, "/v1/chat/completions", chatBody(""), "Authorization", "Bearer "+k); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", k, resp.StatusCode, body)
		}
	}
	keys.set(nil, nil)
	if resp, _ := h.post(t, "/v1/chat/completions", chatBody("")); resp.StatusCode != 401 {
		t.Errorf("with a static key and no stored one the API must stay closed, got %d", resp.StatusCode)
	}
}

func TestMountedRoutes(t *testing.T) {
	h := startGateway(t, nil, func(_ *Config, d *Deps) {
		d.Mount = func(r fiber.Router) {
			r.Get("/console/page", func(c *fiber.Ctx) error { return c.SendString("console page") })
			r.Add(fiber.MethodGet, "/", func(c *fiber.Ctx) error { return c.Redirect("/console/page") })
		}
	})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path string
		status     int
		body       string
	}{
		{"mounted route", "/console/page", 200, "console page"},
		{"mounted root redirect", "/", 200, "console page"},
		{"health still first", "/health", 200, `{"status":"ok"}`},
		{"catch-all still last", "/console/nothing", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(tc.path)
			if status != tc.status || (tc.body != "" && body != tc.body) {
				t.Fatalf("GET %s: %d %q, want %d %q", tc.path, status, body, tc.status, tc.body)
			}
		})
	}
	// HEAD / (Claude Code's probe) is still the gateway's own answer.
	resp, err := http.Head(h.url + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD /: %v %v", resp, err)
	}
	resp.Body.Close()
	if resp, body := h.post(t, "/v1/chat/completions", chatBody("")); resp.StatusCode != 200 {
		t.Fatalf("the API behind a mount: %d %s", resp.StatusCode, body)
	}
}
