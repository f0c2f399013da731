package daemon_test

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/adminapi"
)

// TestUpServesProfilesOnlyWhenAsked: with --pprof the API serves the heap
// profile to the local token and to no request without a real admin
// credential (a bare one, or one whose Authorization header names no key
// at all, which once took the keyless loopback path to the profile);
// without it there is no profile at all.
func TestUpServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, profile := range []bool{true, false} {
		cfg := upConfig(t, "--sim", "1x4090", "--pprof="+strconv.FormatBool(profile))
		baseURL, stop := serveTestUp(t, cfg)
		token, err := os.ReadFile(cfg.Data().LocalToken())
		if err != nil {
			t.Fatal(err)
		}
		get := func(withToken bool, header ...string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, baseURL+"/debug/pprof/heap?debug=1", nil)
			if withToken {
				req.Header.Set(adminapi.LocalTokenHeader, strings.TrimSpace(string(token)))
			}
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		bare, _ := get(false)
		code, body := get(true)
		if profile {
			for _, h := range [][]string{
				{"Authorization", "Basic Zm9vOmJhcg=="},
				{"Authorization", "x"},
				{"Authorization", "Bearer sk-hearth-not-a-key"},
				{"x-api-key", "not-a-key"},
				{adminapi.LocalTokenHeader, "not-the-token"},
			} {
				if got, b := get(false, h...); got != http.StatusUnauthorized && got != http.StatusForbidden {
					t.Errorf("--pprof: %s: %q answered %d %.80q, want 401 or 403", h[0], h[1], got, b)
				}
			}
		}
		switch {
		case profile && (bare != http.StatusUnauthorized || code != http.StatusOK || !strings.Contains(body, "heap profile")):
			t.Errorf("--pprof: bare request %d, with the local token %d %.80q; want 401, and 200 with the heap profile", bare, code, body)
		case !profile && code == http.StatusOK:
			t.Errorf("without --pprof the heap profile is served: %.80q", body)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}
