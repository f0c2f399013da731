package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/tlsca"
)

func TestUpRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	base := []string{"--sim", "1x4090"}
	cases := []struct {
		name    string
		args    []string
		wantErr string // "" = accepted
	}{
		{"loopback by default", nil, ""},
		{"loopback named", []string{"--listen", "localhost:8000"}, ""},
		{"IPv6 loopback", []string{"--listen", "[::1]:8000"}, ""},
		{"every address, plain", []string{"--listen", "0.0.0.0:8080"}, "--tls auto"},
		{"empty host, plain", []string{"--listen", ":8080"}, "--tls auto"},
		{"a LAN name, plain", []string{"--listen", "box.lan:8080"}, "--tls auto"},
		{"every address, --tls auto", []string{"--listen", "0.0.0.0:8080", "--tls", "auto"}, ""},
		{"every address, own certificate", []string{"--listen", "0.0.0.0:8080", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, ""},
		{"every address, --insecure-lan", []string{"--listen", "0.0.0.0:8080", "--insecure-lan"}, ""},
		{"unknown --tls", []string{"--tls", "on"}, "unknown --tls"},
		{"certificate without key", []string{"--tls-cert", "c.pem"}, "go together"},
		{"auto and own certificate", []string{"--tls", "auto", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "drop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
			_, err := parseUpFlags(env, append(append([]string{}, base...), tc.args...))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error naming %q", tc.wantErr)
			case tc.wantErr != "" && (!errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want a usage error naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestUpRefusesEveryAddressWithoutKeys(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skipf("cannot listen on 0.0.0.0 here: %v", err)
	}
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, []string{"--sim", "1x4090", "--listen", ln.Addr().String(), "--tls", "auto", "--data-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = serveUp(context.Background(), io.Discard, slog.New(slog.DiscardHandler), cfg, ln)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--api-key") || !strings.Contains(err.Error(), daemon.ServerKeysEnv) {
		t.Fatalf("serveUp on %s without keys: %v, want a usage error naming --api-key and $%s", ln.Addr(), err, daemon.ServerKeysEnv)
	}
}

// TestUpServesTLSWithItsOwnCA starts hearth up --tls auto and reaches it
// through Go's client and curl, each trusting only the CA the daemon left
// in its data directory.
func TestUpServesTLSWithItsOwnCA(t *testing.T) {
	dataDir := t.TempDir()
	baseURL, _ := serveTestUp(t, []string{"--sim", "1x4090", "--speedup", "100", "--data-dir", dataDir, "--tls", "auto"})
	if !strings.HasPrefix(baseURL, "https://") {
		t.Fatalf("base URL %s is not https", baseURL)
	}
	caPath := filepath.Join(dataDir, "tls", "ca.pem")
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem does not parse")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// localhost is a name the certificate holds, next to 127.0.0.1.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(baseURL, "https://"))
	for _, u := range []string{baseURL + "/v1/models", "https://localhost:" + port + "/v1/models"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s trusting the CA: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "qwen3") {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
		}
	}
	if _, err := http.Get(baseURL + "/health"); err == nil {
		t.Fatal("a client trusting only the system roots connected")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed: the curl --cacert half of this test needs it")
	}
	out, err := exec.Command(curl, "-sS", "--noproxy", "*", "--cacert", caPath, "https://localhost:"+port+"/health").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok"`) {
		t.Fatalf("curl --cacert %s: %v: %s", caPath, err, out)
	}
}

// TestUpTLSPrintsTrustAndSecuresTheCookie: under --tls auto the daemon
// prints the CA's fingerprint and each client's trust setting, and the
// console's session cookie is Secure.
func TestUpTLSPrintsTrustAndSecuresTheCookie(t *testing.T) {
	baseURL, printed := startUpPrinting(t, "--tls", "auto")
	caPath := regexp.MustCompile(`CA certificate: (\S+)`).FindStringSubmatch(printed)
	if caPath == nil {
		t.Fatalf("no CA path printed:\n%s", printed)
	}
	caPEM, err := os.ReadFile(caPath[1])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("ca.pem holds no PEM block")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{tlsca.Fingerprint(ca), "NODE_EXTRA_CA_CERTS=" + caPath[1], "CODEX_CA_CERTIFICATE=" + caPath[1], "--cacert " + caPath[1], "https://127.0.0.1:"} {
		if !strings.Contains(printed, want) {
			t.Errorf("hearth up did not print %q:\n%s", want, printed)
		}
	}
	token := setupTokenLine.FindStringSubmatch(printed)
	if token == nil {
		t.Fatalf("no setup token printed:\n%s", printed)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	const password = "a long owner password"
	form := url.Values{"token": {token[1]}, "password": {password}, "confirm": {password}}
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/console/setup", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", baseURL)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Value != "" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("setup over TLS: status %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v: want Secure, HttpOnly, SameSite=Strict", session)
	}
}
