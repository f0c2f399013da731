package tlsca

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestLoadOrCreateKeepsTheCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	a, err := LoadOrCreate(dir, "box", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreate(dir, "box", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatalf("second start made a new CA: %s then %s", a.Fingerprint(), b.Fingerprint())
	}
	if got := a.Certificate().Subject.CommonName; got != "Hearth CA box" {
		t.Errorf("CA subject %q", got)
	}
	if len(a.Fingerprint()) != 32*3-1 {
		t.Errorf("fingerprint %q is not 32 hex bytes", a.Fingerprint())
	}
	for file, want := range map[string]os.FileMode{CAKeyFile: 0o600, CAFile: 0o644} {
		st, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", file, st.Mode().Perm(), want)
		}
	}
	if a.CertPath() != filepath.Join(dir, "ca.pem") {
		t.Errorf("CertPath %q", a.CertPath())
	}
}

func TestLoadOrCreateRefusesHalfACA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir, "", t0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAFile)); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreate(dir, "", t0)
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("a key without its certificate: got %v, want a refusal", err)
	}
}

func TestServerCertificateIsKeptUntilNamesOrExpiryChange(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir(), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	names := LocalNames("box.example.org", []net.IP{net.ParseIP("192.168.1.20")})
	first, err := a.ServerCertificate(names, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"localhost", "box", "box.local", "box.example.org"} {
		if first.Leaf.VerifyHostname(want) != nil {
			t.Errorf("certificate does not cover %s (has %v)", want, first.Leaf.DNSNames)
		}
	}
	for _, want := range []string{"192.168.1.20", "127.0.0.1", "::1"} {
		if first.Leaf.VerifyHostname(want) != nil {
			t.Errorf("certificate does not cover %s (has %v)", want, first.Leaf.IPAddresses)
		}
	}
	serialOf := func(c tls.Certificate) string { return c.Leaf.SerialNumber.String() }
	cases := []struct {
		name  string
		names Names
		now   time.Time
		same  bool
	}{
		{"same names, a day later", names, t0.Add(24 * time.Hour), true},
		{"same names in another order", Names{DNS: []string{"BOX.local", "box", "localhost", "box.example.org"}, IPs: []net.IP{net.ParseIP("::1"), net.ParseIP("192.168.1.20"), net.ParseIP("127.0.0.1")}}, t0, true},
		{"a new LAN address", LocalNames("box.example.org", []net.IP{net.ParseIP("10.0.0.5")}), t0, false},
		{"within a month of expiry", names, t0.Add(serverLifetime - 10*24*time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case starts from the first certificate.
			if _, err := a.ServerCertificate(names, t0); err != nil {
				t.Fatal(err)
			}
			kept, err := a.ServerCertificate(names, t0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.ServerCertificate(tc.names, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if same := serialOf(got) == serialOf(kept); same != tc.same {
				t.Errorf("reused = %v, want %v", same, tc.same)
			}
		})
	}
}

// serve answers HTTPS with cert on loopback until the test ends.
func serve(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello over tls") })}
	go srv.Serve(tls.NewListener(ln, ServerConfig(cert)))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func TestGoClientTrustsTheGeneratedCA(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir(), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := a.ServerCertificate(LocalNames("box", nil), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cert)
	_, port, _ := net.SplitHostPort(addr)

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.CertPEM()) {
		t.Fatal("CA PEM does not parse")
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := trusting.Get(fmt.Sprintf("https://%s/", net.JoinHostPort(host, port)))
		if err != nil {
			t.Fatalf("client trusting the CA, %s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello over tls" {
			t.Errorf("%s answered %q", host, body)
		}
	}
	// A client that does not trust the CA must fail: the test proves
	// something only if trust is what made the difference.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	if _, err := plain.Get("https://" + addr + "/"); err == nil {
		t.Fatal("a client without the CA connected")
	}
}

func TestCurlTrustsTheGeneratedCA(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed: the curl --cacert check needs it")
	}
	dir := t.TempDir()
	a, err := LoadOrCreate(dir, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := a.ServerCertificate(LocalNames("box", nil), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cert)
	_, port, _ := net.SplitHostPort(addr)
	url := "https://localhost:" + port + "/"
	out, err := exec.Command(curl, "-sS", "--noproxy", "*", "--cacert", a.CertPath(), url).CombinedOutput()
	if err != nil || string(out) != "hello over tls" {
		t.Fatalf("curl --cacert %s %s: %v: %s", a.CertPath(), url, err, out)
	}
	// Without the CA (and with an empty store in its place) curl refuses.
	empty := filepath.Join(dir, "empty.pem")
	other, err := LoadOrCreate(filepath.Join(dir, "other"), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, other.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(curl, "-sS", "--noproxy", "*", "--cacert", empty, url).CombinedOutput(); err == nil {
		t.Fatalf("curl trusting another CA connected: %s", out)
	}
}

func TestLoadKeyPairReadsTheUsersOwn(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreate(dir, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ServerCertificate(LocalNames("box", nil), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(filepath.Join(dir, ServerFile), filepath.Join(dir, CAKeyFile)); err == nil {
		t.Fatal("a key of another certificate was accepted")
	}
}
