package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tlsca"
)

// TestUpTLSPrintsTrustAndSecuresTheCookie: under --tls auto the daemon
// prints the CA's fingerprint and each client's trust setting, and the
// console's session cookie is Secure.
func TestUpTLSPrintsTrustAndSecuresTheCookie(t *testing.T) {
	baseURL, printed := startUpPrinting(t, []string{"--tls", "auto"})
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
