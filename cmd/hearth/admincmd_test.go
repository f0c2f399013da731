package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/tlsca"
)

// TestDaemonCommandsTrustHearthsCA: under --tls auto the daemon's
// certificate comes from its own CA under the data directory; hearth
// engines and hearth cluster status read that directory's tls/ca.pem, and
// a client without it refuses the certificate.
func TestDaemonCommandsTrustHearthsCA(t *testing.T) {
	dataDir := t.TempDir()
	now := time.Now()
	ca, err := tlsca.LoadOrCreate(filepath.Join(dataDir, "tls"), "test", now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServerCertificate(tlsca.LocalNames("test", nil), now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/engines":
			w.Write([]byte(`{"engines":[{"name":"rig/gpu0","runtime":"sim","kind":"vllm","model":"m","gpu":0,"state":"ready","base_url":"","restarts":0,"last_error":"","since":"2026-01-01T00:00:00Z"}]}`))
		case "/api/v1/nodes":
			w.Write([]byte(`{"cluster":"","nodes":[]}`))
		}
	}))
	srv.TLS = tlsca.ServerConfig(cert)
	srv.StartTLS()
	defer srv.Close()

	if out, _, err := runHearth(t, "", "engines", "--addr", srv.URL, "--data-dir", dataDir); err != nil || !strings.Contains(out, "rig/gpu0") {
		t.Errorf("hearth engines over https with the CA: %v\n%s", err, out)
	}
	if out, _, err := runHearth(t, "", "cluster", "status", "--addr", srv.URL, "--data-dir", dataDir); err != nil || out != "this node belongs to no cluster\n" {
		t.Errorf("hearth cluster status over https with the CA: %v\n%s", err, out)
	}
	_, _, err = runHearth(t, "", "engines", "--addr", srv.URL, "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "is hearth up running at "+srv.URL+"?") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("hearth engines without the CA: %v, want the certificate refused", err)
	}
}

// TestDaemonCommandsExplainErrors: the daemon's refusals come with its
// message, and a missing key with how to pass one.
func TestDaemonCommandsExplainErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") == "":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"missing API key: /api/v1 needs an admin key (Authorization: Bearer)"}`))
		case strings.HasSuffix(r.URL.Path, "/accept"):
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"message":"no pending join request with that id: \"r9\"","type":"not_found_error","param":null,"code":null}}`))
		}
	}))
	defer srv.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"engines", "--addr", srv.URL},
			"401 Unauthorized: missing API key: /api/v1 needs an admin key (Authorization: Bearer) (pass an admin API key with --api-key or $HEARTH_API_KEY)"},
		{[]string{"logs", "rig/gpu0", "--addr", srv.URL},
			"401 Unauthorized: missing API key: /api/v1 needs an admin key (Authorization: Bearer) (pass an admin API key with --api-key or $HEARTH_API_KEY)"},
		{[]string{"cluster", "accept", "r9", "--addr", srv.URL, "--api-key", "sk"},
			`404 Not Found: no pending join request with that id: "r9"`},
	}
	for _, tc := range cases {
		_, _, err := runHearth(t, "", tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("hearth %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	_, _, err := runHearth(t, "", "engines", "--addr", "127.0.0.1:8000")
	if !errors.Is(err, errUsage) {
		t.Errorf("an --addr that is no URL: %v, want a usage error", err)
	}
}
