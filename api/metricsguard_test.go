package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// adminKeys is fakeKeys that names some of its keys admin keys.
type adminKeys struct {
	fakeKeys
	admin []string
}

func (k *adminKeys) IsAdminKey(ctx context.Context, secret string) bool {
	if k.CheckKey(ctx, secret) != nil {
		return false
	}
	for _, a := range k.admin {
		if a == secret {
			return true
		}
	}
	return false
}

func TestMetricsNeedAnAdminKeyFromElsewhere(t *testing.T) {
	keys := &adminKeys{admin: []string{"sk-admin"}}
	keys.set([]string{"sk-admin", "sk-inference"}, nil)
	h := startGateway(t, nil, withKeys("sk-cli"), func(_ *Config, d *Deps) { d.Keys = keys })

	// From loopback (the harness's real listener), no key is needed.
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("loopback: status %d", resp.StatusCode)
	}
	// fiber's in-memory test connection comes from 0.0.0.0: another
	// machine.
	for _, tc := range []struct {
		name   string
		host   string
		header [2]string
		status int
	}{
		{"no key", "box.lan:8000", [2]string{}, http.StatusUnauthorized},
		{"inference key", "box.lan:8000", [2]string{"Authorization", "Bearer sk-inference"}, http.StatusUnauthorized},
		{"unknown key", "box.lan:8000", [2]string{"Authorization", "Bearer sk-nope"}, http.StatusUnauthorized},
		{"admin key", "box.lan:8000", [2]string{"Authorization", "Bearer sk-admin"}, http.StatusOK},
		{"admin key as x-api-key", "box.lan:8000", [2]string{"x-api-key", "sk-admin"}, http.StatusOK},
		{"command-line key", "box.lan:8000", [2]string{"Authorization", "bearer sk-cli"}, http.StatusOK},
		{"a loopback Host from elsewhere is still elsewhere", "127.0.0.1:8000", [2]string{}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://"+tc.host+"/metrics", nil)
			if tc.header[0] != "" {
				req.Header.Set(tc.header[0], tc.header[1])
			}
			resp, err := h.gw.app.Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct{ xAPIKey, auth, want string }{
		{"sk-a", "Bearer sk-b", "sk-a"}, // Anthropic's header first
		{"", "Bearer sk-b", "sk-b"},
		{"", "bearer   sk-b  ", "sk-b"},
		{"  ", "Bearer sk-b", "sk-b"},
		{"", "Basic sk-b", ""},
		{"", "Bearer", ""},
		{"", "Bearer ", ""},
		{"", "", ""},
	} {
		if got := requestKey(tc.xAPIKey, tc.auth); got != tc.want {
			t.Errorf("requestKey(%q, %q) = %q, want %q", tc.xAPIKey, tc.auth, got, tc.want)
		}
	}
}

func FuzzRequestKey(f *testing.F) {
	for _, s := range [][2]string{{"sk-a", ""}, {"", "Bearer sk-b"}, {"", "BEARER\tx"}, {" ", "bearer  "}, {"", "Bearer\u00a0x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, xAPIKey, auth string) {
		key := requestKey(xAPIKey, auth)
		if key != strings.TrimSpace(key) {
			t.Fatalf("key %q is not trimmed", key)
		}
		if key != "" && key != strings.TrimSpace(xAPIKey) && !strings.HasSuffix(strings.TrimSpace(auth), key) {
			t.Fatalf("key %q comes from neither header (%q, %q)", key, xAPIKey, auth)
		}
		if strings.TrimSpace(xAPIKey) == "" && !strings.HasPrefix(strings.ToLower(auth), "bearer ") && key != "" {
			t.Fatalf("key %q from a non-Bearer Authorization %q", key, auth)
		}
	})
}
